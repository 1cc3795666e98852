"""What a recording says of each section it recorded: the page and README's table read this, not printed text."""

import recordings


def test_a_section_whose_cell_raised_is_recorded_failed_naming_the_cell():
    entry = recordings.section_entry(8, {8: {"status": "ok", "headline": "h"}}, {8: "s8-reasons"}, {}, "c" * 40, "t")
    assert entry["status"] == "FAILED" and entry["failed_cell"] == "s8-reasons", (
        f"a section with a raising cell must be FAILED and name the cell, whatever its status cell said: {entry}"
    )
    assert "s8-reasons" in entry["reason"], f"the reason must name the cell that failed: {entry['reason']!r}"


def test_a_section_keeps_the_status_and_headline_its_own_cells_recorded():
    entry = recordings.section_entry(3, {3: {"status": "ok", "headline": "spread"}}, {}, {"wall_s": 1.5}, "c", "t")
    assert (entry["status"], entry["headline"], entry["failed_cell"]) == ("ok", "spread", None), entry
    assert entry["cost"] == {"wall_s": 1.5} and entry["notebook_commit"] == "c", entry


def test_a_section_whose_status_cell_never_ran_is_not_run():
    entry = recordings.section_entry(5, {}, {}, {}, "c", "t")
    assert entry["status"] == "NOT RUN", f"no status and no failure means the section did not finish: {entry}"
