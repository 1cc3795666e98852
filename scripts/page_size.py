#!/usr/bin/env python3
"""How much a reader has to take in: visible code lines and words of prose in the tutorial notebook.

    python scripts/page_size.py [NOTEBOOK]     # default: the tutorial notebook

Visible code: the non-blank lines of every code cell that Colab does not fold (a folded cell's first line is
`# @title`). Prose: the words (runs of non-whitespace) of every markdown cell. The issue "Lessons that hold on
every run" caps them at 800 lines and 5,000 words; the script exits 1 when either is over.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent.parent / "nsight_python_t4_tutorial.ipynb"
MAX_CODE_LINES, MAX_WORDS = 800, 5000


def page_size(path: Path) -> tuple[int, int]:
    """(visible code lines, words of prose) of a notebook."""
    code_lines = words = 0
    for cell in json.loads(path.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            words += len(source.split())
        elif cell["cell_type"] == "code" and not source.lstrip().startswith("# @title"):
            code_lines += sum(1 for line in source.splitlines() if line.strip())
    return code_lines, words


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=NOTEBOOK, help="the notebook (default: the tutorial)")
    path = parser.parse_args(argv).notebook
    try:
        code_lines, words = page_size(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        print(f"page_size.py: NOTEBOOK {path} cannot be read as a notebook ({type(error).__name__}: {error}); give "
              "the path of an .ipynb file, or none for the tutorial", file=sys.stderr)  # fmt: skip
        return 2
    print(f"{path.name}: {code_lines} visible code lines (at most {MAX_CODE_LINES}), {words} words of prose "
          f"(at most {MAX_WORDS})")  # fmt: skip
    return 0 if code_lines <= MAX_CODE_LINES and words <= MAX_WORDS else 1


if __name__ == "__main__":
    sys.exit(main())
