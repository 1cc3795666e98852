"""The reader's page (tools/reading_page.py): a run's executed notebook with today's prose, naming its run."""

from __future__ import annotations

import json
import re
import shutil

import nbformat
import pytest
import reading_page
from fakes import files_of
from support import NOTEBOOK

RUNS = reading_page.run_folders()
on_runs = pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])


def section_headings(cells) -> list[str]:
    return [
        cell.source.split("\n")[0]
        for cell in cells
        if cell.cell_type == "markdown" and re.match(r"## \d+\. ", cell.source)
    ]


def test_every_committed_page_is_its_run_with_todays_prose():
    assert RUNS, f"no docs/verified/*/{NOTEBOOK.name}: keep a run (tools/keep_run.py, docs/maintainers.md)"
    assert reading_page.main(["--check"]) == 0, "run python tools/reading_page.py (no new run needed)"


@on_runs
def test_a_page_names_its_run_and_says_how_colab_differs(run):
    page = nbformat.read(run / reading_page.PAGE, as_version=4)
    summary, run_info = (json.loads((run / name).read_text()) for name in ("summary.json", "run_info.json"))
    note = page.cells[1].source
    for fact in (summary["environment"]["gpu"], run_info["commit"][:7], run_info["started_utc"][:10]):
        assert fact in note, f"the page's first note must name {fact}: {note}"
    ids = [cell.get("id") for cell in page.cells]
    assert ids.index("page-colab") == ids.index("s1") + 1 and "apt" in page.cells[ids.index("page-colab")].source
    sections = section_headings(page.cells)
    assert sections == section_headings(nbformat.read(NOTEBOOK, as_version=4).cells) and len(sections) == 10, sections
    assert "takeaways" in ids, "the page ends with the takeaways"


def test_a_page_has_todays_prose_its_runs_code_cells_and_folded_cells_as_colab_shows_them(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(RUNS[0], run)
    today = nbformat.read(NOTEBOOK, as_version=4)
    cells = {cell.id: cell for cell in today.cells}
    cells["s3-read"].source = "Prose written after the run."
    cells["s5-run"].source += "\n# edited after the run"
    at = [cell.id for cell in today.cells].index("s2-run")
    today.cells.insert(at + 1, nbformat.v4.new_markdown_cell("A new paragraph.", id="s2-new-read"))
    nbformat.write(today, tmp_path / NOTEBOOK.name)
    monkeypatch.setattr(reading_page, "NOTEBOOK", tmp_path / NOTEBOOK.name)
    page = {cell.get("id"): cell for cell in reading_page.build(run).cells}
    ran = {cell.id: cell for cell in nbformat.read(run / NOTEBOOK.name, as_version=4).cells}
    assert page["s3-read"].source == "Prose written after the run." and "s2-new-read" in page, "today's prose"
    ids = list(page)
    assert ids.index("s2-new-read") == ids.index("s2-run") + 1, "a new paragraph stands where today's notebook has it"
    assert (page["s5-run"].source, page["s5-run"].outputs) == (ran["s5-run"].source, ran["s5-run"].outputs)
    assert "`s5-run`" in page["page-run"].source, f"the changed code cell must be named: {page['page-run'].source}"
    modules = cells["harness"].source.splitlines()[1].removeprefix("# Source: ").split(" (embedded by")[0]
    harness = page["harness"]  # folded as Colab shows it, naming what the cell embeds
    assert harness.source.endswith(f"its code: {modules}") and harness.metadata["cellView"] == "form", harness


@pytest.mark.parametrize(
    ("given", "name", "said"),
    [
        ("never ran", NOTEBOOK.name, "no code cell of it ran .*scripts/run_headless"),
        ("a page", reading_page.PAGE, f"give the run's {NOTEBOOK.name}"),  # a page never overwrites its input
    ],
)
def test_a_notebook_that_never_ran_or_is_not_the_runs_is_refused_and_nothing_is_written(tmp_path, given, name, said):
    path = shutil.copy(NOTEBOOK if given == "never ran" else RUNS[0] / NOTEBOOK.name, tmp_path / name)
    before = files_of(tmp_path)
    with pytest.raises(SystemExit, match=said):
        reading_page.main(["--executed", str(path)])
    assert files_of(tmp_path) == before, "a page was written"
