"""tools/page_size.py estimates how long the tutorial takes to read (prose, visible code, what cells print, tables
and plots), outside and inside "Going further", and the tutorial keeps to the limits."""

import os
import re
import resource
import subprocess
import sys

import nbformat
import page_size
import pytest
from support import NOTEBOOK, ROOT

code, markdown = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell
TABLE = nbformat.v4.new_output("display_data", {"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "1"})
PLOT = nbformat.v4.new_output("display_data", {"image/png": "iVBOR", "text/plain": "<Figure size 600x400 with 1 Axes>"})


def page(path, cells):
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def executed(tmp_path, cells):
    """A page where each code cell printed `outputs` (the tutorial and the page share the cells' sources)."""
    return page(tmp_path / "executed.ipynb", cells), page(tmp_path / "tutorial.ipynb", cells)


def printed(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def test_reading_time_counts_prose_code_lines_printed_words_and_pictures(tmp_path):
    lesson = [
        markdown("## 2. A section\n\n" + "word " * 196),  # 200 words: 1 minute
        code("x = 1\n\n\ny = 2\n", outputs=[printed("said " * 100)]),  # 2 lines (12 s), 100 words (0.5 minute)
        code("frame", outputs=[TABLE]),  # 1 line (6 s), a table (0.5 minute)
        code("# @title Folded plot\nplot()", outputs=[PLOT]),  # folded: no lines, a plot (0.5 minute)
    ]
    done, tutorial = executed(tmp_path, lesson)
    measures = page_size.page_size(tutorial, done)
    assert measures["core_minutes"] == measures["total_minutes"] == pytest.approx(1 + 0.2 + 0.5 + 0.1 + 0.5 + 0.5, 0.01)
    assert (measures["visible_lines"], measures["folded_lines"], measures["largest_visible_cell"]) == (3, 2, 2)


def test_going_further_counts_in_the_total_only_until_the_next_heading_of_its_level(tmp_path):
    lesson = [
        markdown("## 3. Section"),
        markdown("### Going further: extra\n\n" + "word " * 196),  # an extra minute
        code("\n".join(f"x{i} = {i}" for i in range(10))),  # an extra minute of code
        markdown("## 4. Next section\n\n" + "word " * 195),  # core again: 1 minute
    ]
    measures = page_size.page_size(page(tmp_path / "t.ipynb", lesson), None)
    assert measures["core_minutes"] == pytest.approx(1 + 2 / 200, abs=0.05), measures
    assert measures["total_minutes"] == pytest.approx(3 + 2 / 200, abs=0.1), measures


def test_a_cell_that_no_executed_page_holds_counts_no_output(tmp_path):
    done = page(tmp_path / "executed.ipynb", [code("other = 1", outputs=[printed("word " * 400)])])
    tutorial = page(tmp_path / "tutorial.ipynb", [code("mine = 1")])
    assert page_size.page_size(tutorial, done)["total_minutes"] == pytest.approx(0.1)


@pytest.mark.parametrize(("lines", "status"), [(20, 0), (21, 1)])
def test_page_size_exits_1_naming_the_measure_over_its_limit_and_0_at_it(tmp_path, capsys, lines, status):
    small = page(tmp_path / "t.ipynb", [code("\n".join(f"x{i}" for i in range(lines)))])
    assert page_size.main([str(small), "--outputs", str(small)]) == status
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
    measures = page_size.page_size(NOTEBOOK)
    assert measure not in page_size.over_limits(measures), (
        f"the tutorial is over its limit on {measure} ({measures[measure]}): run python tools/page_size.py, then "
        "cut prose or visible code, move extras under a 'Going further' heading, or split the cell"
    )


def test_the_readme_states_the_reading_times_page_size_measures():
    measures, readme = page_size.page_size(NOTEBOOK), (page_size.ROOT / "README.md").read_text()
    said = re.search(r"reads in ([\d.]+) minutes outside its \"Going further\" parts and ([\d.]+) in all", readme)
    assert said, "README.md must say how long the tutorial reads, as tools/page_size.py counts it"
    measured = [measures["core_minutes"], measures["total_minutes"]]  # page_size.py's, to a tenth of a minute
    assert [float(minutes) for minutes in said.groups()] == measured, f"README says {said.group(0)!r}: {measured}"


def test_page_size_measures_the_tutorial_when_given_no_notebook(capsys):
    page_size.main([])
    assert NOTEBOOK.name in capsys.readouterr().out, "with no argument page_size.py must measure the tutorial"


def two_gib_at_most():  # a read of /dev/zero that is not refused ends in MemoryError, not in the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("/dev/zero", "NOTEBOOK /dev/zero is a character device, not a regular file"),
        ("{tmp}/pipe.ipynb", "is a FIFO (named pipe), not a regular file"),
        ("{tmp}", "is a folder, not a regular file"),
    ],
)
def test_a_device_a_fifo_or_a_folder_is_refused_at_once_not_read(tmp_path, given, said):
    """/dev/zero once filled 5.4 GB in 7 s and a FIFO hung the script: only a regular file is opened."""
    os.mkfifo(tmp_path / "pipe.ipynb")
    command = [sys.executable, str(ROOT / "tools" / "page_size.py"), given.format(tmp=tmp_path)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, preexec_fn=two_gib_at_most)
    except subprocess.TimeoutExpired:
        pytest.fail(f"page_size.py {given} did not return: check safe_io.require_regular_file before reading")
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_page_size_without_a_recorded_page_says_to_render_one_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(page_size, "RECORDED_PAGE", None)  # a clone whose docs/verified holds no recording
    assert page_size.main([]) == 2, "no printed outputs to count: the reading time would be too low"
    assert "run tools/render_recorded.py, or give --outputs" in capsys.readouterr().err
