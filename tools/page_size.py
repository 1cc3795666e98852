#!/usr/bin/env python3
"""How long the tutorial takes to read, against the limits of the issue "The lesson a learner reads in half an hour".

The count: prose words / 200 a minute, 6 s a visible code line (non-blank lines of code cells Colab does not fold; a
folded one starts `# @title`), printed words / 200 a minute and half a minute a table or plot. What a cell prints
comes from an executed page (default: the recorded Nsight Compute page, which ran every section), matched to the
tutorial's cell by its source. Cells under a heading that starts "Going further" (until the next heading of the
same or a higher level) are extras: the core time leaves them out, the total counts them. Each measure is printed
beside its limit (LIMITS); the exit status is 1 when one is over, 2 when a file cannot be read.
"""

import argparse
import json
import re
import sys
from pathlib import Path

import safe_io
from notebook_format import DEFAULT_NOTEBOOK as NOTEBOOK  # the tutorial
from notebook_format import is_folded

ROOT = Path(__file__).resolve().parent.parent
# The committed recording's page (docs/verified/<gpu>-ncu-<version>/), whose printed outputs count
RECORDED_PAGE = max((ROOT / "docs" / "verified").glob("*-ncu-*/recorded_sections.ipynb"), default=None)
WORDS_A_MINUTE, SECONDS_A_LINE, MINUTES_A_PICTURE = 200, 6, 0.5
LIMITS = {  # measure: (most allowed, what it counts)
    "core_minutes": (30, "minutes to read outside 'Going further'"),
    "total_minutes": (45, "minutes to read in all"),
    "largest_visible_cell": (20, "lines in the largest visible cell"),
    "folded_lines": (600, "folded code lines"),
}
GOING_FURTHER = re.compile(r"^(#+)\s+Going further", re.MULTILINE)
HEADING = re.compile(r"^(#+)\s", re.MULTILINE)


def source_of(cell: dict) -> str:
    return "".join(cell.get("source", ""))


def code_lines(cell: dict) -> int:
    return sum(1 for line in source_of(cell).splitlines() if line.strip())


def output_cost(outputs: list[dict]) -> tuple[int, int]:
    """(printed words, tables and plots) of a cell's outputs: a picture or an HTML table counts as one, else text."""
    words, pictures = 0, 0
    for output in outputs:
        data = output.get("data", {})
        if any(kind.startswith("image/") for kind in data) or "<table" in "".join(data.get("text/html", "")):
            pictures += 1
        elif output.get("output_type") == "stream":
            words += len("".join(output.get("text", "")).split())
        elif output.get("output_type") == "error":
            words += len(f"{output.get('ename', '')} {output.get('evalue', '')}".split())
        else:
            words += len("".join(data.get("text/plain", "")).split())
    return words, pictures


def outputs_by_source(page: dict) -> dict[str, list[dict]]:
    """An executed page's outputs, keyed by the stripped source of the cell that printed them."""
    return {source_of(cell).strip(): cell.get("outputs", []) for cell in page.get("cells", []) if cell.get("outputs")}


def extra_flags(cells: list[dict]) -> list[bool]:
    """For each cell, whether it sits under a 'Going further' heading."""
    flags, extra_level = [], None
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            headings = HEADING.findall(source_of(cell))
            if headings and extra_level is not None and len(headings[0]) <= extra_level:
                extra_level = None
            further = GOING_FURTHER.search(source_of(cell))
            if further and extra_level is None:
                extra_level = len(further.group(1))
        flags.append(extra_level is not None)
    return flags


def cell_minutes(cell: dict, outputs: list[dict]) -> float:
    if cell.get("cell_type") == "markdown":
        return len(source_of(cell).split()) / WORDS_A_MINUTE
    if cell.get("cell_type") != "code":
        return 0.0
    lines = 0 if is_folded(cell) else code_lines(cell)
    words, pictures = output_cost(outputs)
    return lines * SECONDS_A_LINE / 60 + words / WORDS_A_MINUTE + pictures * MINUTES_A_PICTURE


def read_notebook(path: Path, what: str) -> dict:
    """A notebook's JSON from a regular file of bounded size (a device or FIFO would fill memory or hang)."""
    return json.loads(safe_io.read_text(path, what=what))


def page_size(path: Path, executed: Path | None = RECORDED_PAGE) -> dict[str, float]:
    cells = read_notebook(path, "NOTEBOOK")["cells"]
    printed = outputs_by_source(read_notebook(executed, "--outputs")) if executed else {}
    minutes = [cell_minutes(cell, printed.get(source_of(cell).strip(), [])) for cell in cells]
    extras = extra_flags(cells)
    visible = [code_lines(cell) for cell in cells if cell.get("cell_type") == "code" and not is_folded(cell)]
    return {
        "core_minutes": round(sum(m for m, extra in zip(minutes, extras, strict=True) if not extra), 1),
        "total_minutes": round(sum(minutes), 1),
        "largest_visible_cell": max(visible, default=0),
        "folded_lines": sum(code_lines(cell) for cell in cells if is_folded(cell)),
        "visible_lines": sum(visible),
        "words": sum(len(source_of(cell).split()) for cell in cells if cell.get("cell_type") == "markdown"),
    }


def over_limits(measures: dict[str, float]) -> list[str]:
    return [measure for measure, (limit, _) in LIMITS.items() if measures[measure] > limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=NOTEBOOK, help="the notebook (default: the tutorial)")
    parser.add_argument(
        "--outputs",
        type=Path,
        default=RECORDED_PAGE,
        help="an executed page whose outputs count (default: the recorded Nsight Compute page)",
    )
    args = parser.parse_args(argv)
    if args.outputs is None:
        print("page_size.py: no recorded page under docs/verified: run tools/render_recorded.py, or give --outputs",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        measures = page_size(args.notebook, args.outputs)
    except safe_io.FileRefused as error:
        print(f"page_size.py: {error} (an .ipynb; none: the tutorial)", file=sys.stderr)
        return 2
    except (json.JSONDecodeError, RecursionError, KeyError, TypeError, AttributeError) as error:
        print(
            f"page_size.py: NOTEBOOK {args.notebook} or --outputs {args.outputs} cannot be read as a notebook "
            f"({type(error).__name__}: {error}); give the paths of .ipynb files",
            file=sys.stderr,
        )
        return 2
    over = over_limits(measures)
    name = args.notebook.name
    for measure, (limit, what) in LIMITS.items():
        print(f"{name}: {measures[measure]:g} {what} (at most {limit}){'  <- OVER' if measure in over else ''}")
    print(f"{name}: {measures['visible_lines']} visible code lines, {measures['words']} words of prose")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
