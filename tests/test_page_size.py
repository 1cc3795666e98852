"""scripts/page_size.py measures what a reader must take in (visible and folded code lines without blanks, words of
prose), and the tutorial keeps to the limits."""

import nbformat
import page_size
import pytest
from support import NOTEBOOK

code, markdown = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell


def page(tmp_path, cells):
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "page.ipynb")
    return tmp_path / "page.ipynb"


@pytest.mark.parametrize(
    ("cells", "measures"),
    [([markdown("## A heading\n\nFive words of prose here."), code("x = 1\n\n\ny = 2\n"), code("a\nb\nc\nd"), code("z"),
       code("# @title Folded plumbing\nz = 3\nw = 4"), nbformat.v4.new_raw_cell("raw text is neither")],
      {"visible_lines": 7, "largest_visible_cell": 4, "median_visible_cell": 2, "folded_lines": 3, "words": 8}),
     ([], {"visible_lines": 0, "largest_visible_cell": 0, "median_visible_cell": 0, "folded_lines": 0, "words": 0}),
     ([code("  # @title indented still folds\nx = 1"), code("\n\n")],
      {"visible_lines": 0, "largest_visible_cell": 0, "median_visible_cell": 0, "folded_lines": 2, "words": 0})],
)  # fmt: skip
def test_page_size_counts_visible_and_folded_lines_without_blanks_and_the_words_of_prose(tmp_path, cells, measures):
    assert page_size.page_size(page(tmp_path, cells)) == measures


@pytest.mark.parametrize(("lines", "status"), [(20, 0), (21, 1)])
def test_page_size_exits_1_naming_the_measure_over_its_limit_and_0_at_it(tmp_path, capsys, lines, status):
    small = [code("x = 1") for _ in range(3)]  # the median stays within its limit
    assert page_size.main([str(page(tmp_path, [code("\n".join(f"x{i}" for i in range(lines))), *small]))]) == status
    said, out = f"{lines} lines in the largest visible cell (at most 20)", capsys.readouterr().out
    assert f"{said}  <- OVER" in out if status else said + "\n" in out, out


@pytest.mark.parametrize("content", ["not a notebook", '{"cells": [{"cell_type": "code"', "[1, 2]", ""])
def test_page_size_names_a_file_that_is_no_notebook(tmp_path, capsys, content):
    (tmp_path / "notes.ipynb").write_text(content)
    assert page_size.main([str(tmp_path / "notes.ipynb")]) == 2
    said = capsys.readouterr().err
    assert f"NOTEBOOK {tmp_path / 'notes.ipynb'}" in said, f"name the file: {said}"


@pytest.mark.parametrize("measure", page_size.LIMITS)
def test_the_tutorial_keeps_to_the_limit_on(measure):
    assert measure not in page_size.over_limits(page_size.page_size(NOTEBOOK)), (
        f"the tutorial is over its limit on {measure}: run python scripts/page_size.py, then split the cell, move "
        "plumbing into a folded helper or tighten the prose"
    )


def test_page_size_measures_the_tutorial_when_given_no_notebook(capsys):
    assert page_size.main([]) == 0, "with no argument page_size.py must measure the tutorial"
    assert NOTEBOOK.name in capsys.readouterr().out
