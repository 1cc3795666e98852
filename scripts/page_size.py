#!/usr/bin/env python3
"""How much a reader has to take in, against the limits of the issue "A tutorial a learner finishes in half an hour".

Visible code: non-blank lines of the code cells Colab does not fold (a folded one starts `# @title`); folded code:
the folded cells' non-blank lines; prose: words of the markdown cells. Each is printed beside its limit (LIMITS); the
exit status is 1 when one is over.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

from notebook_format import DEFAULT_NOTEBOOK as NOTEBOOK  # the tutorial
from notebook_format import is_folded

LIMITS = {  # measure: (most allowed, what it counts)
    "visible_lines": (450, "visible code lines"), "largest_visible_cell": (20, "lines in the largest visible cell"),
    "median_visible_cell": (10, "lines in the median visible cell"), "folded_lines": (600, "folded code lines"),
    "words": (2600, "words of prose")}  # fmt: skip


def page_size(path: Path) -> dict[str, float]:
    visible, folded, words = [], 0, 0
    for cell in json.loads(path.read_text())["cells"]:
        source = "".join(cell["source"])
        lines = sum(1 for line in source.splitlines() if line.strip())
        if cell["cell_type"] == "markdown":
            words += len(source.split())
        elif is_folded(cell):
            folded += lines
        elif cell["cell_type"] == "code":
            visible.append(lines)
    median = statistics.median(visible) if visible else 0
    return {"visible_lines": sum(visible), "largest_visible_cell": max(visible, default=0),
            "median_visible_cell": median, "folded_lines": folded, "words": words}  # fmt: skip


def over_limits(measures: dict[str, float]) -> list[str]:
    return [measure for measure, (limit, _) in LIMITS.items() if measures[measure] > limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=NOTEBOOK, help="the notebook (default: the tutorial)")
    path = parser.parse_args(argv).notebook
    try:
        measures = page_size(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        print(f"page_size.py: NOTEBOOK {path} cannot be read as a notebook ({type(error).__name__}: {error}); give "
              "the path of an .ipynb file, or none for the tutorial", file=sys.stderr)  # fmt: skip
        return 2
    over = over_limits(measures)
    for measure, (limit, what) in LIMITS.items():
        print(f"{path.name}: {measures[measure]:g} {what} (at most {limit}){'  <- OVER' if measure in over else ''}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
