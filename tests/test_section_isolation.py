"""The notebook's own section cells, run in a real kernel without a GPU: skipping and failing stay contained.

The harness cell arms a guard on every section cell. These tests run the real cells of whole sections in
the two situations a reader meets without seeing the plumbing: CUPTI mode (the counter sections are
SKIPPED with one short line and run nothing) and a section that breaks (it is FAILED, the next section
still runs, and strict mode refuses the run at the summary).
"""

from __future__ import annotations

import pytest
from conftest import cell_by_id, section_code_cells
from kernel_session import CellError, KernelSession

from plumbing.cells import CUPTI_SECTIONS, NCU_ONLY_SECTIONS


@pytest.fixture
def kernel(notebook, tmp_path):
    with KernelSession(env={"NSPY_TUTORIAL_OUT": str(tmp_path / "out")}, cwd=tmp_path) as session:
        session.run(cell_by_id(notebook, "harness").source)
        yield session


def test_counter_sections_are_skipped_with_one_line_each_in_cupti_mode(notebook, kernel):
    kernel.run("NCU_ONLY_SKIP = 'this run uses CUPTI because: no ncu 2026.2.1+'")
    for number in sorted(NCU_ONLY_SECTIONS):
        cells = section_code_cells(notebook, number)
        printed = [kernel.run(cell.source) for cell in cells]  # none may raise: torch and nsight are absent here
        assert printed[0].strip().startswith("SKIPPED"), f"section {number}'s opener must say SKIPPED: {printed[0]!r}"
        assert "CUPTI because" not in printed[0], "the reason belongs to the banner, said once, not to every section"
        chatter = {cell.get("id"): text for cell, text in zip(cells[1:], printed[1:], strict=True) if text.strip()}
        assert not chatter, f"cells of SKIPPED section {number} printed or ran something: {chatter}"
        section = kernel.value(f"SECTIONS[{number}]")
        assert (section["status"], section["environment_limit"]) == ("SKIPPED", True), section


def test_sections_that_run_on_cupti_are_not_skipped_in_cupti_mode(notebook, kernel):
    kernel.run("NCU_ONLY_SKIP = 'this run uses CUPTI because: no ncu 2026.2.1+'")
    for number in sorted(CUPTI_SECTIONS):
        opened = kernel.run(section_code_cells(notebook, number)[0].source)
        assert "SKIPPED" not in opened and kernel.value(f"SECTIONS[{number}]['status']") == "ok", (
            f"section {number} runs on CUPTI (plumbing/cells.py) but its opener skipped it: {opened!r}"
        )


def test_counter_sections_are_not_skipped_when_nsight_compute_is_in_use(notebook, kernel):
    kernel.run("NCU_ONLY_SKIP = ''")
    opener = section_code_cells(notebook, 4)[0]
    assert "SKIPPED" not in kernel.run(opener.source)
    assert kernel.value("SECTIONS[4]['status']") == "ok"


def test_a_broken_section_fails_alone_and_strict_mode_refuses_the_run(notebook, kernel):
    # Without a GPU there is no torch or nsight: section 2's first real cell raises NameError.
    runs = [kernel.execute(cell.source) for cell in section_code_cells(notebook, 2)]
    assert all(run.status == "ok" for run in runs), "Run all must go on past a failing cell of a section"
    assert any("Section 2 is marked FAILED (NameError" in run.stdout for run in runs), [run.stdout for run in runs]
    kernel.run("# @title (what section 1 leaves behind in CUPTI mode)\nNCU_ONLY_SKIP = 'no ncu'")
    for cell in section_code_cells(notebook, 4):
        kernel.run(cell.source)
    assert kernel.value("SECTIONS[4]['status']") == "SKIPPED", "a failure must not leak into the next section"
    kernel.run("# @title (headless runs)\nSTRICT = True")
    with pytest.raises(CellError) as raised:
        kernel.run(cell_by_id(notebook, "summary-code").source)
    assert "section 2 FAILED: NameError" in raised.value.evalue, raised.value.evalue
    assert "section 3 NOT RUN" in raised.value.evalue, "sections whose cells never ran must fail strict mode too"
