#!/usr/bin/env python3
"""The reader's page of a recorded run: its executed notebook with today's prose, nothing executed again.

python tools/reading_page.py                  # every docs/verified/* that holds an executed notebook
python tools/reading_page.py --executed OUT_DIR/nsight_python_t4_tutorial.ipynb    # scripts/run_headless's
python tools/reading_page.py --check          # exit 1 when a committed page is not what this makes today

Writes reading_page.ipynb beside it: code cells and outputs as they ran (folded ones as Colab shows them), today's
markdown cells, a note naming the run and the code cells changed since, and one on how Colab differs in section 1.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

try:
    import nbformat
except ImportError as missing:
    raise SystemExit(
        f"this Python ({sys.executable}) lacks {missing.name}: run .ci/venv/bin/python tools/reading_page.py "
        "(scripts/run_tests makes .ci/venv)"
    ) from None

import notebook_format
import safe_io
from embed_modules import embedded_modules
from verified_table import NOTEBOOK, ROOT, changed_code_cells, code_cells, profiler_name

PAGE = "reading_page.ipynb"
COLAB_NOTE = (
    "*On Colab this section differs:* the project's GPU runner, which made this page, is offline, so section 1 "
    "installed every package from a wheelhouse and did not try apt. On Colab it downloads Nsight Compute through apt "
    "(300 to 400 MB, a few minutes) and nsight-python attaches it to the notebook's own process."
)
LAUNCH_NOTE = (
    " This runner's Nsight Compute ({version}) is too old for that, so every profiled call here ran in Nsight "
    "Compute's launch mode (recording/): in a child Python under `ncu --clock-control none`, with nsight's own flags "
    'and extraction; a call that asked for other clocks (section 4\'s `clock_control="base"`) ran with the clocks '
    "as they were."
)


def reading_cell(cell):
    """A folded cell as Colab shows it (its title, its outputs) and where its code lives (the modules it embeds, else
    the notebook's cell itself); other cells as they are."""
    cell = copy.deepcopy(cell)
    if notebook_format.is_folded(cell):  # its fold tag goes with its title (notebook_format.py)
        title = cell.source.lstrip().split("\n", 1)[0]
        modules = ", ".join(path for path, _ in embedded_modules(cell.source))  # the run's commit passed embed_modules
        home = modules or f"{NOTEBOOK.name}, cell {cell.get('id', '?')}"
        cell.source = f"{title}\n# Folded, as Colab shows it; its code: {home}"
        cell.metadata["cellView"] = "form"
    return cell


def read_executed(executed: Path):
    """The executed notebook of a headless run; SystemExit naming what is wrong with it and what to give instead."""
    again = f"give the executed notebook scripts/run_headless wrote (OUT_DIR/{NOTEBOOK.name})"
    try:
        notebook = nbformat.reads(safe_io.read_text(executed, "--executed"), as_version=4)
    except safe_io.FileRefused as refused:
        raise SystemExit(f"{refused}; {again}") from None
    except (ValueError, AttributeError, TypeError) as error:  # a run killed while nbmake wrote it
        raise SystemExit(f"{executed}: not a readable notebook ({error}); run scripts/run_headless again") from None
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if not any(cell.get("execution_count") or cell.get("outputs") for cell in code):
        raise SystemExit(f"{executed}: no code cell of it ran (no outputs): {again}")
    return notebook


def run_note(folder: Path, executed, environment: dict) -> str:
    run_info = json.loads((folder / "run_info.json").read_text())
    changed = changed_code_cells(code_cells(executed), code_cells(json.loads(NOTEBOOK.read_text())))
    since = ", ".join(f"`{cell_id}`" for cell_id in changed) or "none"
    command, profiler = run_info.get("command", "scripts/run_headless"), profiler_name(environment)
    return (
        f"> **This page is the notebook as it ran** on an **{environment['gpu']}**, measured with **{profiler}**, "
        f"from commit `{run_info['commit'][:7]}` on {run_info['started_utc'][:10]} (`{command}`). "
        f"Its code cells and outputs are that run's; its prose is today's notebook's. Code cells changed since "
        f"that commit: {since}."
    )


def build(folder: Path):
    """The reading page of the run in `folder` (its executed notebook, summary.json and run_info.json)."""
    executed = read_executed(folder / NOTEBOOK.name)
    today = {cell.get("id"): cell for cell in nbformat.read(NOTEBOOK, as_version=4).cells}
    page = copy.deepcopy(executed)  # prose may change without a new run: today's markdown cells, where they are now
    page.cells = [reading_cell(cell) for cell in executed.cells if cell.cell_type == "code"]
    at = 0
    for cell_id, cell in today.items():
        ids = [cell.get("id") for cell in page.cells]
        if cell.cell_type == "markdown":
            page.cells.insert(at, copy.deepcopy(cell))
            at += 1
        elif cell_id in ids:
            at = ids.index(cell_id) + 1
    environment = json.loads((folder / "summary.json").read_text())["environment"]
    note = nbformat.v4.new_markdown_cell(run_note(folder, executed, environment), id="page-run")
    launch = LAUNCH_NOTE.format(version=environment.get("ncu_version")) if environment.get("ncu_mode") else ""
    colab = nbformat.v4.new_markdown_cell(COLAB_NOTE + launch, id="page-colab")
    page.cells.insert(1, note)
    first = next((i for i, cell in enumerate(page.cells) if cell.get("id") == "s1"), 1)
    page.cells.insert(first + 1, colab)
    return page


def page_text(folder: Path) -> str:
    return nbformat.writes(build(folder)).rstrip("\n") + "\n"


def write_page(folder: Path) -> Path:
    safe_io.write_text(folder / PAGE, page_text(folder), "the page")  # never through a link to the executed notebook
    return folder / PAGE


def run_folders() -> list[Path]:
    return sorted(path.parent for path in (ROOT / "docs" / "verified").glob(f"*/{NOTEBOOK.name}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executed", type=Path, help=f"a run's executed notebook: write {PAGE} beside it")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed page is not what this makes")
    args = parser.parse_args(argv)
    folders = [args.executed.parent] if args.executed else run_folders()
    try:
        if args.executed and args.executed.name != NOTEBOOK.name:
            raise SystemExit(f"--executed {args.executed}: give the run's {NOTEBOOK.name}, not another file")
        if args.check:
            stale = [f for f in folders if not (f / PAGE).is_file() or (f / PAGE).read_text() != page_text(f)]
            print("\n".join(f"stale: {f / PAGE}" for f in stale) or "every page is current")
            return 1 if stale else 0
        for folder in folders:
            print(f"wrote {write_page(folder)}")
    except safe_io.FileRefused as refused:
        print(f"reading_page.py: {refused}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
