#!/usr/bin/env python3
"""Render the Nsight Compute sections (record_ncu.SECTIONS) from a recording by scripts/record_ncu.py, on a CPU.

    python scripts/render_recorded.py                                   # every docs/verified/*/recording.json
    python scripts/render_recorded.py docs/verified/nvidia-h200-ncu-2025.3.1
    python scripts/render_recorded.py --executed headless_run/nsight_python_t4_tutorial.ipynb   # CUPTI-mode page

Writes recorded_sections.ipynb (executed), recorded_sections.html and figures.json into the recording's folder.
With --executed it turns a notebook that scripts/run_headless executed into its HTML page instead: a section
that was SKIPPED shows its heading and one line pointing to the recorded page, the CUPTI fallback reason is
printed once (in section 1's banner), and every plot gets alt text from its cell's title and axis labels.
Every output and plot on the page comes from the notebook's own cells, run by id in a real kernel (nbclient):
the harness, section 1's names from the recording, the define cells, then each section's analysis cells. The
cells that called the profiler (the run cells) are shown with the output they printed on the GPU machine, not
run again. Folded '# @title' cells run with their input dropped (tag remove-input).

Re-rendering unchanged data changes no file: cell ids are fixed (page-<n>), no execution times are kept, and
when nothing but the rendering time would change, nothing is written.
Needs nbformat, nbclient and nbconvert (requirements-harness.txt; the test suite's .ci/venv has them).
"""

from __future__ import annotations

import argparse
import ast
import datetime
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
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config
except ImportError as missing:
    raise SystemExit(
        f"render_recorded.py needs nbformat, nbclient and nbconvert, and this Python ({sys.executable}) lacks "
        f"{missing.name}. Run it with the test suite's environment: scripts/run_tests makes .ci/venv, then "
        ".ci/venv/bin/python scripts/render_recorded.py; or install them: "
        "python3 -m pip install -r requirements-harness.txt"
    ) from None

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_format  # noqa: E402
import record_ncu  # noqa: E402

ROOT = record_ncu.ROOT
SECTION_NUMBERS = tuple(record_ncu.SECTIONS)  # the sections the recorder records, in order
SECTION_LIST = list(SECTION_NUMBERS)
SECTION_NAMES = ", ".join(map(str, SECTION_NUMBERS[:-1])) + f" and {SECTION_NUMBERS[-1]}"  # "4, 6, 7, 9 and 10"
# The page is an executed copy of notebook cells (its lint is the notebook's); torch is never imported on a CPU.
LINT_NOTE = "# ruff: noqa: F401, F811, F821\n"
PAGE = "recorded_sections"
VOLATILE = ("rendered_utc",)  # figures.json keys that change with every rendering, not with the data


def folded(source: str, hide: str = "remove-input") -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source.rstrip("\n"), metadata={"tags": [hide]})


def label(recording: dict) -> str:
    provenance, wall = recording["provenance"], recording["wall_s"]
    per_section = ", ".join(
        f"section {number}: {info['ncu_wall_s']:.1f} s in {info['calls']} ncu run(s)"
        for number, info in wall["per_section"].items()
    )
    return f"""# Sections {SECTION_NAMES}, from a recording

**What this page is.** The outputs and plots below are made by the tutorial notebook's own cells, executed on a CPU
by `scripts/render_recorded.py`, from Nsight Compute data recorded on a GPU machine. Nothing here is typed by hand.

| | |
| --- | --- |
| GPU | {provenance["gpu"]} (driver {provenance["driver"]}) |
| Nsight Compute | `ncu` {provenance["ncu_version"]}, **launch mode** (`ncu ... python3 record_ncu.py`), not attach |
| nsight-python | {provenance["nsight_python"]} (its own profiling session, extraction and aggregation), ncu-report \
{provenance["ncu_report"]} |
| torch | {provenance["torch"]} (CUDA {provenance["torch_cuda"]}), Python {provenance["python"]} |
| notebook | commit `{provenance["notebook_commit"]}`, sha256 `{provenance["notebook_sha256"][:16]}...` |
| recorded | {recording["created_utc"]} by `scripts/record_ncu.py` |
| ncu wall time | {per_section} |

**How it was recorded.** nsight-python 1.1.0 attaches only to ncu 2026.2.1 or newer; this GPU machine has ncu
{provenance["ncu_version"]}. So `scripts/record_ncu.py` ran the notebook's own cells with nsight's collector replaced:
each profiled call ran nsight's own profiling session in a fresh Python process *under* the ncu command line, with
the flags nsight's attach command passes (`--nvtx --nvtx-include regex:nsight-python@.+ --cache-control ...
--clock-control none --replay-mode ... --metrics ...`), and nsight's own `extract_df_from_report` and aggregation
turned each report into the frame `to_dataframe()` returns. The machine is shared and its clocks stay as they are,
so every ncu run there gets `--clock-control none`; a call that asks for base clocks is shown from the earlier
recording that ran it, named where it appears. The counters, replays, cache and clock control and
everything the notebook does with the frames are the real thing; only the trigger differs from a Colab run. Wall
times measured this way include starting a Python process per call, so they are not what attach costs.

Cells marked *recorded* called the profiler on the GPU machine: they are shown with the output they printed there.
"""


def served_note(recording: dict, number: int) -> str:
    """Where section `number`'s calls that were not run in this recording came from (clock control other than none)."""
    served = [call for call in recording["calls"] if call.get("served_from") and call.get("section") == number]
    notes = [
        f" The call with `cache_control={call['cache_control']!r}, clock_control={call['clock_control']!r}` was not "
        f"run in this recording (the runner's clocks stay as they are: every ncu there gets `--clock-control none`); "
        f"its rows come from {call['served_from']['label']}, which requested {', '.join(call['metrics'])} only "
        "(any other metric shows as NaN)."
        for call in served
    ]
    return "".join(notes)


def wall_note(recording: dict, number: int) -> str:
    """The ncu wall time the recording measured for section `number`'s profiled calls, or '' where it has none.

    A section whose cells run ncu themselves (section 10's command line) has no profiled calls for the recorder
    to time: its cells print their own time, so the note adds nothing that could contradict them.
    """
    info = recording["wall_s"]["per_section"].get(str(number), {})
    if not info.get("calls"):
        return ""
    seconds, calls = info["ncu_wall_s"], info["calls"]
    return f" ({seconds:.1f} s of ncu wall time in {calls} run(s), Python start-up per call included)"


def recorded_cell(cell: dict, output: str) -> nbformat.NotebookNode:
    node = nbformat.v4.new_code_cell(cell["source"], metadata={"tags": ["skip-execution"]})
    if output:
        node.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    return node


def build(folder: Path) -> tuple[nbformat.NotebookNode, dict]:
    recording = record_ncu.load_recording(folder)
    cells = record_ncu.load_cells()
    by_id = {cell["id"]: cell for cell in cells}
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    notebook.cells.append(nbformat.v4.new_markdown_cell(label(recording)))
    notebook.cells.append(folded(by_id["harness"]["source"], hide="remove-cell"))  # prints only OUT_DIR
    here = Path(os.path.relpath(folder.resolve(), ROOT)).as_posix()  # the kernel runs in the repository
    notebook.cells.append(folded(record_ncu.cpu_section_one_source(here, "scripts") + LINT_NOTE))
    for cell_id in record_ncu.prelude_cell_ids(cells)[1:]:  # other sections' definitions: run, not shown
        notebook.cells.append(folded(by_id[cell_id]["source"], hide="remove-cell"))
    for number in SECTION_NUMBERS:
        spec = record_ncu.SECTIONS[number]
        if number == 10:
            notebook.cells.append(
                folded(
                    "# @title The section 7 report, from the recording\n"
                    f"_restored = _recorder.restore_fusion_report({json.dumps(here)}, OUT_DIR)\n"
                )
            )
        injected = False
        for cell in record_ncu.section_cells(cells, number):
            if cell["type"] == "markdown":
                notebook.cells.append(nbformat.v4.new_markdown_cell(cell["source"]))
                continue
            if cell["id"] in spec["run"]:
                if cell["id"] == spec["run"][0]:
                    notebook.cells.append(
                        nbformat.v4.new_markdown_cell(
                            f"*Recorded:* the next cell(s) ran on the {recording['provenance']['gpu']} under ncu "
                            f"{recording['provenance']['ncu_version']} in launch mode{wall_note(recording, number)}; "
                            "below is what they printed there." + served_note(recording, number)
                        )
                    )
                notebook.cells.append(recorded_cell(cell, recording["cell_output"].get(cell["id"], "")))
                continue
            if not injected and cell["id"] not in (record_ncu.opener_id(number), *spec["define"]):
                notebook.cells.append(folded(record_ncu.inject_source(number)))
                injected = True
            is_folded = notebook_format.is_folded({"cell_type": "code", **cell})
            notebook.cells.append(folded(cell["source"]) if is_folded else nbformat.v4.new_code_cell(cell["source"]))
    notebook.cells.append(
        folded(
            "# @title Section status and figures, for figures.json\n"
            "import json as _json\n"
            "\n"
            '_RUN_TIMES = ("started", "seconds")  # this CPU rendering\'s timings: not the GPU\'s, and never the same\n'
            f"_page = {{n: {{k: v for k, v in SECTIONS[n].items() if k not in _RUN_TIMES}} for n in {SECTION_LIST}}}\n"
            'print("@@PAGE@@" + _json.dumps({"sections": _page, "figures": FIGURES}, default=str))\n',
            hide="remove-cell",
        )
    )
    for number, cell in enumerate(notebook.cells):
        cell.id = f"page-{number:03d}"  # fixed ids: a re-rendering gives the same page, byte for byte
    return notebook, recording


# ---------------------------------------------------------------- alt text for plots
TITLE_CALLS = {"set_title": "title", "suptitle": "title", "set_xlabel": "x axis", "set_ylabel": "y axis"}
TITLE_KEYWORDS = {"title": "title", "xlabel": "x axis", "ylabel": "y axis"}


def _text(node: ast.AST) -> str:
    """A string constant as written; an f-string with its {fields} as they read in the source."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{...}" for part in node.values)
    return ""


def alt_text(source: str) -> str:
    """Alt text for the plot a cell draws: its titles, then its axis labels, as the cell writes them."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "plot"
    parts: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr in TITLE_CALLS and node.args and _text(node.args[0]):
            parts.append((node.lineno, TITLE_CALLS[node.func.attr], _text(node.args[0])))
        if node.func.attr == "set":
            for keyword in node.keywords:
                if keyword.arg in TITLE_KEYWORDS and _text(keyword.value):
                    parts.append((keyword.value.lineno, TITLE_KEYWORDS[keyword.arg], _text(keyword.value)))
    parts.sort(key=lambda part: (part[1] != "title", part[0]))
    seen: list[str] = []
    for _, kind, text in parts:
        entry = f"{kind}: {text}"
        if entry not in seen:
            seen.append(entry)
    return "Plot. " + "; ".join(seen) if seen else "plot"


def add_alt_text(page: str, notebook: nbformat.NotebookNode) -> str:
    """Give every PNG output in the HTML the alt text of the cell that drew it: its titles and labels, then the
    alt text the cell built from its data, where it displayed the figure with one."""
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


def export_html(notebook: nbformat.NotebookNode) -> str:
    exporter = HTMLExporter()
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_input_tags={"remove-input"}, remove_cell_tags={"remove-cell"}), enabled=True
    )
    page, _ = exporter.from_notebook_node(notebook)
    return add_alt_text(page, notebook)


# ---------------------------------------------------------------- the CUPTI-mode page of a headless run
SKIPPED_MARK = "SKIPPED"
SECTION_HEADING = re.compile(r"^## (\d+)\. ")


def printed(cell) -> str:
    streams = [output for output in cell.get("outputs", []) if output.get("output_type") == "stream"]
    return "".join(output.get("text", "") for output in streams)


def cupti_reason(notebook: nbformat.NotebookNode) -> str:
    """The fallback reason, as section 1's banner printed it (the line after 'because'), or ''."""
    for cell in notebook.cells:
        lines = printed(cell).splitlines() if cell.cell_type == "code" else []
        for index, line in enumerate(lines):
            if line.startswith("CUPTI MODE") and index + 1 < len(lines):
                return lines[index + 1].strip()
    return ""


def collapse_skipped_sections(notebook: nbformat.NotebookNode, recorded_link: str) -> nbformat.NotebookNode:
    """A SKIPPED section keeps its heading and one line pointing to the recorded page; the reason stays once."""
    reason = cupti_reason(notebook)
    kept, section, skipped = [], None, set()
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            match = SECTION_HEADING.match(cell.source)
            section = int(match.group(1)) if match else None
            kept.append(cell)
            continue
        if (
            section is not None
            and cell.get("id") == record_ncu.opener_id(section)
            and printed(cell).startswith(SKIPPED_MARK)
        ):
            skipped.add(section)
            heading = kept.pop()  # the section's own heading cell: keep its first line only
            kept.append(nbformat.v4.new_markdown_cell(heading.source.splitlines()[0]))
            where = f"[the recorded page]({recorded_link})" if recorded_link else "the recorded page (none committed)"
            kept.append(
                nbformat.v4.new_markdown_cell(
                    f"*Skipped in this run:* the CUPTI backend has no hardware counters or reports (reason in "
                    f"section 1's banner). This section, run with Nsight Compute, is on {where}."
                )
            )
            continue
        if section in skipped:
            continue
        kept.append(cell)
    if reason:
        banner_seen = False
        for cell in kept:
            for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
                text = output.get("text")
                if output.get("output_type") != "stream" or not text or reason not in text:
                    continue
                if text.lstrip("=\n").startswith("CUPTI MODE") and not banner_seen:
                    banner_seen = True
                    continue
                output["text"] = text.replace(reason, "(the reason is in the CUPTI banner at the end of section 1)")
    notebook.cells = kept
    return notebook


def cupti_page(executed: Path) -> Path:
    """The HTML page of an executed notebook (scripts/run_headless), next to it."""
    try:
        notebook = nbformat.read(executed, as_version=4)
    except ValueError as error:  # not JSON, or cut short: a run killed while nbmake wrote it
        raise SystemExit(
            f"--executed {executed}: nbformat cannot read it as a notebook ({type(error).__name__}); "
            "run scripts/run_headless again to write it whole"
        ) from None
    folders = record_ncu.recording_folders()
    # The page is committed beside the recordings (docs/verified/<gpu>-cupti/), so the link is a sibling folder.
    link = f"../{folders[-1].name}/{PAGE}.html" if folders else ""
    page = export_html(collapse_skipped_sections(notebook, link))
    target = executed.with_suffix(".html")
    target.write_text(page)
    return target


def render(folder: Path) -> tuple[Path, bool]:
    """Render the page into folder; write only what changed (keep rendered_utc when nothing else did)."""
    notebook, recording = build(folder)
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["NSPY_TUTORIAL_OUT"] = str(Path(scratch) / "out")
        os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"
        os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend draws the plots into the page
        NotebookClient(
            notebook,
            timeout=600,
            kernel_name="python3",
            record_timing=False,  # execution timestamps would change every file on every rendering
            resources={"metadata": {"path": str(ROOT)}},
            config=Config({"KernelManager": {"transport": "ipc", "ip": str(Path(scratch) / "k")}}),  # no TCP ports
        ).execute()
    notebook.cells[1].outputs = []  # the harness printed this run's temporary OUT_DIR: not part of the page
    notebook.metadata.get("language_info", {}).pop("version", None)  # the rendering machine's Python, not the data's
    printed = "".join(output.get("text", "") for output in notebook.cells[-1].outputs)
    page = json.loads(printed.rsplit("@@PAGE@@", 1)[1])
    problems = {number: info for number, info in page["sections"].items() if info["status"] != "ok"}
    if problems:
        raise SystemExit(f"sections not ok on the recorded data: {problems}")
    page.update(
        rendered_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        recording_created_utc=recording["created_utc"],
        notebook_sha256=record_ncu.notebook_sha256(),
    )
    html = export_html(notebook)
    text = nbformat.writes(notebook)
    files = {f"{PAGE}.ipynb": text if text.endswith("\n") else text + "\n", f"{PAGE}.html": html}
    changed = write_if_changed(folder, page, files)
    return folder / f"{PAGE}.html", changed


def write_if_changed(folder: Path, page: dict, files: dict[str, str]) -> bool:
    """Write figures.json and the page files, unless only the rendering time would differ from what is there."""
    try:
        old_page = json.loads((folder / "figures.json").read_text())
    except (OSError, ValueError):
        old_page = {}
    same_page = {k: v for k, v in old_page.items() if k not in VOLATILE} == {
        k: v for k, v in page.items() if k not in VOLATILE
    }
    same_files = all((folder / name).exists() and (folder / name).read_text() == text for name, text in files.items())
    if same_page and same_files:
        return False
    (folder / "figures.json").write_text(json.dumps(page, indent=1) + "\n")
    for name, text in files.items():
        (folder / name).write_text(text)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="recording folders (default: all under docs/verified)")
    parser.add_argument("--executed", type=Path, help="an executed notebook from scripts/run_headless: write its HTML")
    args = parser.parse_args(argv)
    if args.executed:
        if not args.executed.is_file():
            raise SystemExit(f"--executed {args.executed}: no such notebook (scripts/run_headless writes it)")
        print(f"rendered {cupti_page(args.executed)}")
        return 0
    folders = [folder.resolve() for folder in args.folders] or record_ncu.recording_folders()
    if not folders:
        raise SystemExit("no docs/verified/*/recording.json: run scripts/record_ncu.py on a GPU machine first")
    for folder in folders:
        page, changed = render(folder)
        print(f"{'rendered' if changed else 'unchanged (same data, same page)'}: {os.path.relpath(page, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
