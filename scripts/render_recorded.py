#!/usr/bin/env python3
"""Render sections 4, 6, 7, 9 and 10 from a recording made by scripts/record_ncu.py, on a CPU.

    python scripts/render_recorded.py                                   # every docs/verified/*/recording.json
    python scripts/render_recorded.py docs/verified/nvidia-h200-ncu-2025.3.1

Writes recorded_sections.ipynb (executed), recorded_sections.html and figures.json into the recording's folder.
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
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

try:
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
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
SECTION_NUMBERS = (4, 6, 7, 9, 10)
SECTION_LIST = list(SECTION_NUMBERS)
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
    return f"""# Sections 4, 6, 7, 9 and 10, from a recording

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
--clock-control ... --replay-mode ... --metrics ...`), and nsight's own `extract_df_from_report` and aggregation
turned each report into the frame `to_dataframe()` returns. The counters, replays, cache and clock control and
everything the notebook does with the frames are the real thing; only the trigger differs from a Colab run. Wall
times measured this way include starting a Python process per call, so they are not what attach costs.

Cells marked *recorded* called the profiler on the GPU machine: they are shown with the output they printed there.
"""


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
                    f"_restored = _record_ncu.restore_fusion_report({json.dumps(here)}, OUT_DIR)\n"
                )
            )
        injected = False
        for cell in record_ncu.section_cells(cells, number):
            if cell["type"] == "markdown":
                notebook.cells.append(nbformat.v4.new_markdown_cell(cell["source"]))
                continue
            if cell["id"] in spec["run"]:
                if cell["id"] == spec["run"][0]:
                    seconds = recording["wall_s"]["per_section"].get(str(number), {}).get("ncu_wall_s", 0)
                    notebook.cells.append(
                        nbformat.v4.new_markdown_cell(
                            f"*Recorded:* the next cell(s) ran on the {recording['provenance']['gpu']} under ncu "
                            f"{recording['provenance']['ncu_version']} in launch mode ({seconds:.1f} s of ncu wall "
                            "time, Python start-up per call included); below is what they printed there."
                        )
                    )
                notebook.cells.append(recorded_cell(cell, recording["cell_output"].get(cell["id"], "")))
                continue
            if not injected and cell["id"] not in (f"s{number}-open", *spec["define"]):
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
        notebook_sha256=record_ncu.hashlib.sha256(record_ncu.NOTEBOOK.read_bytes()).hexdigest(),
    )
    exporter = HTMLExporter()
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_input_tags={"remove-input"}, remove_cell_tags={"remove-cell"}), enabled=True
    )
    html, _ = exporter.from_notebook_node(notebook)
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
    args = parser.parse_args(argv)
    folders = [folder.resolve() for folder in args.folders] or record_ncu.recording_folders()
    if not folders:
        raise SystemExit("no docs/verified/*/recording.json: run scripts/record_ncu.py on a GPU machine first")
    for folder in folders:
        page, changed = render(folder)
        print(f"{'rendered' if changed else 'unchanged (same data, same page)'}: {os.path.relpath(page, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
