"""scripts/page_size.py measures what a reader must take in, and the notebook keeps to the issue's limits.

Visible code: non-blank lines of every code cell Colab does not fold (`# @title` cells are folded), in all, in the
largest cell and in the median one. Folded code: the folded cells' lines. Prose: words of markdown cells.
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import page_size
from support import NOTEBOOK, ROOT


def _notebook(tmp_path, cells):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells
    path = tmp_path / "page.ipynb"
    nbformat.write(notebook, path)
    return path


def test_counts_visible_and_folded_code_lines_without_blanks_and_markdown_words(tmp_path):
    path = _notebook(
        tmp_path,
        [
            nbformat.v4.new_markdown_cell("## A heading\n\nFive words of prose here."),
            nbformat.v4.new_code_cell("x = 1\n\n\ny = 2\n"),  # two visible lines
            nbformat.v4.new_code_cell("a = 1\nb = 2\nc = 3\nd = 4"),  # four
            nbformat.v4.new_code_cell("# @title Folded plumbing\nz = 3\nw = 4"),  # three folded lines
            nbformat.v4.new_raw_cell("raw text is neither"),
        ],
    )
    assert page_size.page_size(path) == {
        "visible_lines": 6, "largest_visible_cell": 4, "median_visible_cell": 3, "folded_lines": 3, "words": 8,
    }  # fmt: skip


def test_exits_1_naming_the_measure_over_its_limit(tmp_path):
    over = _notebook(tmp_path, [nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(21)))])
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "page_size.py"), str(over)], capture_output=True)
    assert done.returncode == 1, done.stdout
    assert b"21 lines in the largest visible cell (at most 20)  <- OVER" in done.stdout, done.stdout


def test_the_tutorial_keeps_to_the_limits_on_visible_code_and_prose():
    over = set(page_size.over_limits(page_size.page_size(NOTEBOOK))) - {"folded_lines"}
    assert not over, (
        f"the tutorial is over its limits on {sorted(over)}: run python scripts/page_size.py, then split the cell, "
        "move plumbing into a folded helper or tighten the prose"
    )


def test_the_tutorials_folded_code_keeps_to_its_limit():
    assert "folded_lines" not in page_size.over_limits(page_size.page_size(NOTEBOOK))
