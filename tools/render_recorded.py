#!/usr/bin/env python3
"""The one page builder: a recording's page, or with --executed the page of a headless (CUPTI) run, on a CPU.

python tools/render_recorded.py [FOLDER ...]     # default: every docs/verified/*/recording.json
python tools/render_recorded.py --executed nspy_tutorial_out/nsight_python_t4_tutorial.ipynb

Each writes a reading page (.ipynb, which GitHub renders: a folded cell shows its title and where its code lives, as
in Colab), the same page as HTML (plots with alt text) and, for a recording, summary.json: all of them or none.
"""

from __future__ import annotations

import argparse
import ast
import copy
import html as html_text
import json
import os
import re
import sys
import tempfile
from pathlib import Path

try:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config
except ImportError as missing:
    raise SystemExit(f"this Python ({sys.executable}) lacks {missing.name}: run .ci/venv/bin/python "
                     "tools/render_recorded.py (scripts/run_tests makes .ci/venv)") from None  # fmt: skip

# Run as tools/render_recorded.py, only tools/ is on sys.path: a recorded page reads its recording through the
# recording wing's recordings.py (which puts the clone, and so the plumbing package, on sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "recording"))
import notebook_format  # noqa: E402
import recordings  # noqa: E402
import safe_io  # noqa: E402
from embed_modules import EmbeddingError, embedded_modules  # noqa: E402
from recordings import NOTEBOOK, ROOT  # noqa: E402
from verified_table import READING_PAGES, numbers_text  # noqa: E402

from plumbing.cells import HARNESS, SUMMARY, reads_report_folders  # noqa: E402

# The page is an executed copy of notebook cells (its lint is the notebook's); torch is never imported on a CPU.
LINT_NOTE = "# ruff: noqa: F401, F811, F821\n"
RECORDED_PAGE, RUN_PAGE = READING_PAGES  # a recording's reading page; a headless run's, beside its executed notebook
HOME = "folded_source"  # a page cell's metadata: where a folded cell's code lives (the reading page shows that)
# Before the notebook's summary cell: each section's time is the GPU machine's (the recording's cost), not this
# CPU's, and section 1 is the recorder's own (its names were made on the GPU machine, then recorded).
GPU_TIMES = """# @title The GPU machine's times stand in for this CPU's (recorded)
for _number, _info in RECORDING["sections"].items():
    SECTIONS.get(int(_number), {})["seconds"] = _info["cost"].get("wall_s")
SECTIONS[1] = {"status": "ok", "reason": "", "environment_limit": False, "seconds": None,
               "headline": f"recorded on the {ENVIRONMENT['gpu']} by {ENVIRONMENT['profiler']}"}
"""


def folded(source: str, home: str, hide: str = "remove-input") -> nbformat.NotebookNode:
    """A folded cell of the page; `home`: where its code lives, which the reading page shows instead of the code."""
    return nbformat.v4.new_code_cell(source.rstrip("\n"), metadata={"tags": [hide], HOME: home})


def notebook_home(cell_id: str, source: str) -> str:
    """Where a notebook's folded cell's code lives: the modules it embeds, else the notebook's cell itself."""
    try:
        modules = [path for path, _ in embedded_modules(source)]
    except EmbeddingError:  # a Source line embed_modules.py would refuse: the cell itself holds the code
        modules = []
    return ", ".join(modules) or f"{NOTEBOOK.name}, cell {cell_id}"


def tags(cell: nbformat.NotebookNode) -> list:
    return cell.get("metadata", {}).get("tags", [])


def reading_cell(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A folded cell as Colab shows it (its title, its outputs) and where its code lives; other cells as they are."""
    cell = copy.deepcopy(cell)
    home = cell.metadata.pop(HOME, None)
    if "remove-input" in tags(cell) or notebook_format.is_folded(cell):
        title = cell.source.lstrip().split("\n", 1)[0]
        home = home or notebook_home(cell.get("id", "?"), cell.source)
        cell.source = f"{title}\n# Folded, as Colab shows it; its code: {home}"
        cell.metadata["cellView"] = "form"
    return cell


def reading_page(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The page a reader opens on GitHub: cells the HTML drops (remove-cell) left out, folded cells as in Colab."""
    page = copy.deepcopy(notebook)
    page.cells = [reading_cell(cell) for cell in notebook.cells if "remove-cell" not in tags(cell)]
    return page


def settings_check(cell_id: str, source: str) -> nbformat.NotebookNode | None:
    """A hidden cell after a define cell: the page stops unless its settings are the recording's (None: it binds
    none). A recording older than the notebook's settings would put today's sizes beside the old figures."""
    names = sorted(recordings.top_level_names(source))
    if not names or source.lstrip().startswith("# @title"):  # a folded define cell holds helpers, not settings
        return None
    check = f"_recording.require_recorded_settings(RECORDING, globals(), {names!r}, {cell_id!r})"
    title = f"# @title The recording's settings are {cell_id}'s"
    return folded(f"{title}\n{check}", "recording/recordings.py", "remove-cell")


def label(recording: dict) -> str:
    provenance = recording["provenance"]
    return f"""# Sections {numbers_text(recordings.recorded_sections(recording))}, from a recording

The outputs and plots below are made by the tutorial notebook's own cells, executed on a CPU by
`tools/render_recorded.py` over Nsight Compute data recorded on a GPU machine: nothing here is typed by hand. Cells
marked *recorded* called the profiler there: they are shown with the source that ran and the output it printed.

| | |
| --- | --- |
| GPU | {provenance["gpu"]} (driver {provenance["driver"]}) |
| Nsight Compute | `ncu` {provenance["ncu_version"]}, **launch mode** (`ncu ... python3 ncu_inner.py`), not attach |
| nsight-python | {provenance["nsight_python"]}, ncu-report {provenance["ncu_report"]} |
| torch | {provenance["torch"]} (CUDA {provenance["torch_cuda"]}), Python {provenance["python"]} |
| notebook | commit `{provenance["notebook_commit"]}`, sha256 `{provenance["notebook_sha256"][:16]}...` |
| recorded | {recording["created_utc"]} by `recording/record_ncu.py` (its cost: docs/maintainers.md) |

**Why launch mode.** nsight-python 1.1.0 attaches only to ncu 2026.2.1 or newer; this machine has ncu
{provenance["ncu_version"]}. So each profiled call ran nsight's own profiling session in a fresh Python process under
`ncu`, with the flags nsight's attach passes (always `--clock-control none`: the shared machine's clocks stay as they
are), and nsight's own extraction and aggregation built the frames. Only the trigger differs from a Colab run.
"""


def clocks_note(recording: dict, number: int) -> str:
    """What section `number`'s calls asked of the clocks that this runner's ncu did not do; '' if nothing."""
    calls = [call for call in recording["calls"] if call.get("section") == number]
    forced = [call for call in calls if call.get("ncu_clock_control", call["clock_control"]) != call["clock_control"]]
    asked = sorted({call["clock_control"] for call in forced})
    if not asked:
        return ""
    given = f"`clock_control={', '.join(map(repr, asked))}`"
    return (
        f" A call here asked for {given}; this runner's ncu ran it with `--clock-control none` (the shared machine's"
        " clocks stay as they are), so its SM clock is the one the GPU chose."
    )


def recorded_cell(cell_id: str, entry: dict) -> nbformat.NotebookNode:
    """A cell as it ran on the GPU machine: the recording's source and what it printed."""
    node = nbformat.v4.new_code_cell(entry["source"], metadata={"tags": ["skip-execution"], "recorded_cell": cell_id})
    if entry["output"]:
        node.outputs = [nbformat.v4.new_output("stream", name="stdout", text=entry["output"])]
    return node


def build(folder: Path) -> tuple[nbformat.NotebookNode, dict]:
    recording, cells = recordings.load_recording(folder), recordings.load_cells()
    gpu, ncu = map(recording["provenance"].get, ("gpu", "ncu_version"))
    ran = f"*Recorded:* the next cell ran on the {gpu} under ncu {ncu} in launch mode; below is what it printed there."
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    notebook.cells.append(nbformat.v4.new_markdown_cell(label(recording)))
    harness = recordings.cell_source(cells, HARNESS)
    notebook.cells.append(folded(harness, notebook_home(HARNESS, harness), "remove-cell"))  # prints only OUT_DIR
    here = Path(os.path.relpath(folder.resolve(), ROOT)).as_posix()  # the kernel runs in the repository
    one = recordings.cpu_section_one_source(here, "recording") + LINT_NOTE
    notebook.cells.append(folded(one, "recording/recordings.py (cpu_section_one_source)"))
    for cell_id in recordings.prelude_cell_ids(cells)[1:]:  # other sections' definitions: run, not shown
        source = recordings.cell_source(cells, cell_id)
        notebook.cells.append(folded(source, notebook_home(cell_id, source), "remove-cell"))
    for number in recordings.recorded_sections(recording):
        if reads_report_folders(number):
            restore = f"_restored = _recording.restore_report_folders(STARTED_IN / {json.dumps(here)}, OUT_DIR)"
            title = "# @title The reports this section reads, from the recording"
            notebook.cells.append(folded(f"{title}\n{restore}", "recording/recordings.py (restore_report_folders)"))
        steps = {cell_id: (role, source) for cell_id, role, source in recordings.cpu_section_sources(cells, number)}
        clocks = clocks_note(recording, number)
        for cell in recordings.section_cells(cells, number):
            role, source = steps.get(cell["id"], ("markdown", cell["source"]))
            entry = recording["cells"].get(cell["id"])
            if role == "markdown":
                notebook.cells.append(nbformat.v4.new_markdown_cell(source))
            elif role in recordings.REPLACED_ON_CPU:  # shown as it ran on the GPU machine, its values stand in here
                if role == "run":
                    notebook.cells.append(nbformat.v4.new_markdown_cell(ran + clocks))
                    clocks = ""  # once, at the section's first run cell
                stand_in = folded(source, "recording/recordings.py (inject_source)")
                notebook.cells += [recorded_cell(cell["id"], entry)] * bool(entry) + [stand_in]
            elif notebook_format.is_folded({"cell_type": "code", **cell}):
                notebook.cells.append(folded(source, notebook_home(cell["id"], source)))
            else:
                notebook.cells.append(nbformat.v4.new_code_cell(source))
            if role == "define" and (check := settings_check(cell["id"], source)):
                notebook.cells.append(check)
    summary = next(index for index, cell in enumerate(cells) if cell["id"] == SUMMARY)
    notebook.cells.append(folded(GPU_TIMES, "tools/render_recorded.py (GPU_TIMES)", "remove-cell"))
    notebook.cells.append(nbformat.v4.new_markdown_cell(cells[summary - 1]["source"]))
    summary_source = cells[summary]["source"]  # the notebook's own: writes OUT_DIR/summary.json
    notebook.cells.append(folded(summary_source, notebook_home(SUMMARY, summary_source)))
    for number, cell in enumerate(notebook.cells):
        cell.id = f"page-{number:03d}"  # fixed ids: a re-rendering gives the same page, byte for byte
    return notebook, recording


# ---------------------------------------------------------------- alt text for plots
TITLE_CALLS = {"set_title": "title", "suptitle": "title", "set_xlabel": "x axis", "set_ylabel": "y axis"}
TITLE_KEYWORDS = {"title": "title", "xlabel": "x axis", "ylabel": "y axis"}


def _text(node: ast.AST) -> str:
    """A string constant as written; an f-string with its {fields} as they read in the source."""
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{...}" for part in node.values)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def alt_text(source: str) -> str:
    """Alt text for the plot a cell draws."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "plot"
    parts: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):  # the plot's own code: no plumbing module draws plots any more
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):  # ax.set_title(...), ax.set(title=...)
            call = node.func.attr
            named = [(TITLE_CALLS[call], node.args[0])] if call in TITLE_CALLS and node.args else []
            keywords = [k for k in node.keywords if call == "set" and k.arg in TITLE_KEYWORDS]
            named += [(TITLE_KEYWORDS[k.arg], k.value) for k in keywords]
            parts += [(value.lineno, kind, _text(value)) for kind, value in named if _text(value)]
    parts.sort(key=lambda part: (part[1] != "title", part[0]))
    seen = dict.fromkeys(f"{kind}: {text}" for _, kind, text in parts)
    return "Plot. " + "; ".join(seen) if seen else "plot"


def export_html(notebook: nbformat.NotebookNode) -> str:
    """Both pages' HTML: folded cells' input dropped, every plot with its cell's alt text."""
    exporter = HTMLExporter()
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_input_tags={"remove-input"}, remove_cell_tags={"remove-cell"}), enabled=True
    )
    page, _ = exporter.from_notebook_node(notebook)
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {}).get("image/png")
            if not data:
                continue
            source = page.find(f'src="data:image/png;base64,{data.strip()[:80]}')
            start = page.rfind("<img", 0, source)
            if source < 0 or start < 0:
                continue
            own = output.get("metadata", {}).get("image/png", {}).get("alt", "")  # a cell's display(Image(alt=...))
            alt = html_text.escape(alt_text(cell.source) + (f". {own}" if own else ""), quote=True)
            tag = re.sub(r'\salt="[^"]*"', "", page[start:source])  # nbconvert's placeholder, if any
            page = page[:start] + tag.replace("<img", f'<img alt="{alt}"', 1) + page[source:]
    return page


def page_files(page: nbformat.NotebookNode, ipynb: Path, html: Path) -> dict[Path, str]:
    """The reading page and the HTML page, as the text each file holds."""
    return {ipynb: nbformat.writes(reading_page(page)).rstrip("\n") + "\n", html: export_html(page)}


def never_executed(notebook: nbformat.NotebookNode) -> bool:
    """True when no code cell ran: no execution count, no output (a copy of the notebook, not a run's)."""
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    return not any(cell.get("execution_count") or cell.get("outputs") for cell in code)


def read_executed(executed: Path) -> nbformat.NotebookNode:
    """The executed notebook of a headless run; SystemExit naming what is wrong with it and what to give instead."""
    again = "give the executed notebook scripts/run_headless wrote (OUT_DIR/nsight_python_t4_tutorial.ipynb)"
    try:
        notebook = nbformat.reads(safe_io.read_text(executed, "--executed"), as_version=4)
    except safe_io.FileRefused as refused:
        raise SystemExit(f"{refused}; {again}") from None
    except (ValueError, AttributeError, TypeError) as error:  # a run killed while nbmake wrote it
        raise SystemExit(
            f"--executed {executed}: not a readable notebook ({error}); run scripts/run_headless again"
        ) from None
    if never_executed(notebook):
        raise SystemExit(f"--executed {executed}: no code cell of it ran (no outputs): {again}")
    return notebook


def cupti_page(executed: Path) -> Path:
    """The reading page and HTML of an executed notebook (scripts/run_headless), beside it, all or none; the executed
    notebook itself is never written (it stays whole, as evidence)."""
    notebook = read_executed(executed)
    files = page_files(notebook, executed.parent / RUN_PAGE, executed.with_suffix(".html"))
    if any(os.path.realpath(target) == os.path.realpath(executed) for target in files):
        raise SystemExit(f"--executed {executed}: that is the page it would write, not a run's executed notebook")
    safe_io.write_files(files, "the page")
    return executed.parent / RUN_PAGE


def joined_streams(outputs: list) -> list:
    """Each run of one stream in one output (how the kernel splits a cell's printing depends on timing)."""
    joined = []
    for output in outputs:
        if joined and output.output_type == joined[-1].output_type == "stream" and joined[-1].name == output.name:
            joined[-1].text += output.text
        else:
            joined.append(output)
    return joined


def sections_not_ok(sections: dict) -> dict:
    """The sections a recorded page may not show: every one not ok (FAILED, NOT RUN, SKIPPED)."""
    return {number: info for number, info in sections.items() if info["status"] != "ok"}


def executed_page(notebook: nbformat.NotebookNode, folder: Path) -> dict:
    """Execute the page in a kernel on this CPU; the summary.json its summary cell wrote. SystemExit if a cell fails."""
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["NSPY_TUTORIAL_OUT"] = str(Path(scratch) / "out")
        os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"
        os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend draws the plots into the page
        # record_timing: timestamps would change every file on every rendering; transport ipc: no TCP ports
        kernel = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(scratch) / "k")}})
        try:
            NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=False,
                           resources={"metadata": {"path": str(ROOT)}}, config=kernel).execute()  # fmt: skip
        except CellExecutionError as error:  # its last line: "ename: evalue", the cause a reader acts on
            cause = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines()[-1]  # IPython colours ename
            raise SystemExit(f"{folder.name}: no page was written: a cell of the page raised {cause}") from None
        written = Path(scratch) / "out" / "summary.json"
        if not written.exists():
            raise SystemExit(f"{folder.name}: the notebook's summary cell wrote no summary.json: a cell above stopped")
        return json.loads(written.read_text(encoding="utf-8"))


def render(folder: Path) -> tuple[Path, bool]:
    """Render the pages into folder, with the summary.json its summary cell wrote; write only what changed, all of it
    or nothing."""
    notebook, recording = build(folder)
    summary = executed_page(notebook, folder)
    notebook.cells[1].outputs = []  # the harness printed this run's temporary OUT_DIR: not part of the page
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = joined_streams(cell.outputs)
    notebook.metadata.get("language_info", {}).pop("version", None)  # the rendering machine's Python, not the data's
    numbers = recordings.recorded_sections(recording)
    problems = sections_not_ok({str(s["number"]): s for s in summary["sections"] if s["number"] in numbers})
    if problems:
        raise SystemExit(f"sections not ok on the recorded data: {problems}")
    summary["created_utc"] = recording["created_utc"]  # when the data was made, not when it was rendered
    files = page_files(notebook, folder / RECORDED_PAGE, folder / RECORDED_PAGE.replace(".ipynb", ".html"))
    files[folder / "summary.json"] = json.dumps(summary, indent=2, default=str) + "\n"
    unchanged = {path for path, text in files.items() if path.is_file() and path.read_text(encoding="utf-8") == text}
    changed = {path: text for path, text in files.items() if path not in unchanged}
    safe_io.write_files(changed, "the page")
    return folder / RECORDED_PAGE, bool(changed)


def recording_problem(folder: Path) -> str | None:
    """Why a folder cannot be read as a recording, and how to make it again; None if it can."""
    path, again = folder / recordings.RECORDING_FILE, "record it again on the GPU machine (recording/record_ncu.py)"
    if not str(folder).isprintable():  # its name goes into the page's code and titles: a newline would start code
        return f"{folder!r}: a folder name with a control character (a newline?): rename the folder"
    if not folder.is_dir():
        return f"{folder} is not a folder: give one that recording/record_ncu.py wrote (docs/verified/<gpu>-ncu-<v>/)"
    try:
        recording = json.loads(safe_io.read_text(path, "the recording"))
        found = recording.get("format")
    except safe_io.FileRefused as refused:
        missing = not path.exists() and not path.is_symlink()
        return f"{folder} holds no {path.name}: {again}" if missing else f"{refused}: {again}"
    except (ValueError, AttributeError) as error:
        restore = f"git checkout -- {safe_io.quoted(path)}"
        return f"{path} cannot be read as a recording ({error}): restore it ({restore}) or {again}"
    if found != recordings.FORMAT:
        return f"{path} is recording format {found}, not {recordings.FORMAT}: {again}"
    if not recording.get("sections"):
        return f"{path} records no section, so its page would show every section NOT RUN: {again}"
    return None


def render_recordings(given: list[Path]) -> int:
    folders = [folder.resolve() for folder in given] or recordings.recording_folders()
    if not folders:
        raise SystemExit("no docs/verified/*/recording.json: run recording/record_ncu.py on a GPU machine first")
    unreadable = [problem for problem in map(recording_problem, folders) if problem]
    if unreadable:  # before any page is rendered or written
        print("\n".join(f"render_recorded.py: {problem}" for problem in unreadable), file=sys.stderr)
        return 2
    for folder in folders:
        page, changed = render(folder)
        print(f"{'rendered' if changed else 'unchanged (same data, same page)'}: {os.path.relpath(page, ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="recording folders (default: all under docs/verified)")
    parser.add_argument(
        "--executed",
        type=Path,
        help=f"an executed notebook from scripts/run_headless: write its reading page ({RUN_PAGE}) and HTML beside it",
    )
    args = parser.parse_args(argv)
    try:
        if args.executed:
            print(f"rendered {cupti_page(args.executed)}")
            return 0
        return render_recordings(args.folders)
    except safe_io.FileRefused as refused:
        print(f"render_recorded.py: {refused}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
