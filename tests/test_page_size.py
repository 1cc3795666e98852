"""scripts/page_size.py counts what a reader must take in, and the notebook stays within the issue's limits.

Visible code: non-blank lines of every code cell Colab does not fold (`# @title` cells are folded). Prose: words of
markdown cells. The limits (800 lines, 5,000 words) come from the issue "Lessons that hold on every run".
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import page_size
from support import ROOT


def _notebook(tmp_path, cells):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells
    path = tmp_path / "page.ipynb"
    nbformat.write(notebook, path)
    return path


def test_counts_visible_code_lines_without_blanks_or_folded_cells_and_markdown_words(tmp_path):
    path = _notebook(
        tmp_path,
        [
            nbformat.v4.new_markdown_cell("## A heading\n\nFive words of prose here."),
            nbformat.v4.new_code_cell("x = 1\n\n\ny = 2\n"),  # two lines that count
            nbformat.v4.new_code_cell("# @title Folded plumbing\nz = 3\nw = 4"),  # folded: none count
            nbformat.v4.new_raw_cell("raw text is neither"),
        ],
    )
    assert page_size.page_size(path) == (2, 8), "2 visible code lines, 3 + 5 words of markdown"


def test_exits_1_over_a_limit_and_0_within_it(tmp_path):
    over = _notebook(tmp_path, [nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(801)))])
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "page_size.py"), str(over)], capture_output=True)
    assert done.returncode == 1 and b"801 visible code lines" in done.stdout, done.stdout
    assert page_size.main([str(ROOT / "nsight_python_t4_tutorial.ipynb")]) == 0, (
        "the tutorial is over its budget of 800 visible code lines or 5,000 words of prose: "
        "run python scripts/page_size.py, then move plotting into plumbing/figures.py or tighten the prose"
    )
