"""The section guard, in a real kernel running the notebook's own harness cell: a raising cell fails its section and
Run all goes on, a SKIPPED or FAILED section runs nothing more, and strict mode is read from its environment variable.
Then the notebook's own section cells without a GPU: in CUPTI mode exactly the sections that need Nsight Compute are
SKIPPED with one short line, and a section that breaks fails alone.
"""

from __future__ import annotations

import json

import pytest
from conftest import cell_by_id, section_code_cells
from kernel_session import CellError, KernelSession

from plumbing.cells import CUPTI_SECTIONS, NCU_ONLY_SECTIONS


@pytest.fixture
def out_dir(tmp_path):
    return tmp_path / "out"


@pytest.fixture
def kernel(notebook, out_dir, tmp_path):
    session = KernelSession(env={"NSPY_TUTORIAL_OUT": str(out_dir), "NSPY_TUTORIAL_STRICT": ""}, cwd=tmp_path)
    session.run(cell_by_id(notebook, "harness").source)
    yield session
    session.close()


def _open(number, title="s", skip_reason=None):
    """What a section's folded opener cell runs."""
    return f"# @title Section {number}\nbegin_section({number}, {title!r}, skip_reason={skip_reason!r})"


def test_the_harness_cell_creates_and_reports_the_output_folder(kernel, out_dir):
    assert out_dir.is_dir(), "the harness cell must create OUT_DIR"
    assert kernel.value("str(OUT_DIR)") == str(out_dir.resolve())


def test_a_raising_cell_fails_its_section_and_the_next_section_still_runs(kernel):
    kernel.run(_open(2, "two"))
    output = kernel.run("raise ZeroDivisionError('first line\\nsecond line')")  # no CellError: Run all goes on
    assert "Section 2 FAILED: ZeroDivisionError: first line" in output, output
    after = kernel.run("print('MUST NOT RUN')")
    assert "MUST NOT RUN" not in after and "not run: section 2 FAILED" in after
    kernel.run(_open(3, "three"))
    assert kernel.run("print(6 * 7)").strip() == "42", "a section after a FAILED one must run normally"
    sections = kernel.value("SECTIONS")
    assert sections["2"]["status"] == "FAILED" and sections["2"]["reason"] == "ZeroDivisionError: first line"
    assert sections["3"]["status"] == "ok"


def test_guarded_cells_keep_their_names_and_show_their_last_value(kernel):
    kernel.run(_open(2))
    kernel.run("def scaled(x):\n    return 3 * x\n\nresult = scaled(14)")
    assert kernel.value("result") == 42 and kernel.value("scaled.__name__") == "scaled"


def test_a_skipped_section_runs_none_of_its_cells_and_says_so_once(kernel):
    opened = kernel.run(_open(4, "four", skip_reason="needs Nsight Compute"))
    assert opened.count("SKIPPED") == 1 and "see the banner" in opened
    assert kernel.run("print('MUST NOT RUN')") == "", "cells of a SKIPPED section print nothing and run nothing"
    section = kernel.value("SECTIONS[4]")
    assert (section["status"], section["reason"], section["environment_limit"]) == (
        "SKIPPED", "needs Nsight Compute", True
    )  # fmt: skip


def test_errors_after_the_last_section_stop_run_all(kernel):
    kernel.run(_open(10) + "\nend_sections()")
    with pytest.raises(CellError):
        kernel.run("raise RuntimeError('summary broke')")


def test_a_raise_in_a_figure_cell_fails_its_section(kernel):
    kernel.run(_open(5, "five"))
    kernel.run("# @title Record figures\n@section_figures(5)\ndef _():\n    raise KeyError('fp16')\n")
    assert kernel.value("SECTIONS[5]['status']") == "FAILED" and "KeyError" in kernel.value("SECTIONS[5]['reason']")


def test_nothing_is_written_outside_the_output_folder(kernel, out_dir, tmp_path):
    kernel.run(_open(1) + "\nsummary, _ = write_summary()")
    outside = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_relative_to(out_dir))
    assert outside == ["out"] or outside == [], f"the harness wrote outside OUT_DIR: {outside}"
    assert [p.name for p in out_dir.iterdir()] == ["summary.json"]


@pytest.mark.parametrize(("strict_value", "raises"), [("1", True), ("0", False), (None, False), ("yes", False)])
def test_strict_mode_from_the_environment_variable_to_the_summary_cell(notebook, tmp_path, strict_value, raises):
    env = {"NSPY_TUTORIAL_OUT": str(tmp_path / "out")}
    if strict_value is not None:
        env["NSPY_TUTORIAL_STRICT"] = strict_value
    session = KernelSession(env=env, cwd=tmp_path)
    try:
        session.run(cell_by_id(notebook, "harness").source)
        session.run(_open(2, "two"))
        session.run("raise RuntimeError('boom')")  # the guard marks section 2 FAILED; no CellError
        summary_cell = cell_by_id(notebook, "summary-code").source
        if raises:
            with pytest.raises(CellError) as raised:
                session.run(summary_cell)
            assert (
                raised.value.ename == "RuntimeError" and "section 2 FAILED: RuntimeError: boom" in raised.value.evalue
            )
        else:
            output = session.run(summary_cell)
            assert "not clean" in output and "section 2 FAILED" in output
        assert json.loads((tmp_path / "out" / "summary.json").read_text())["strict"] is raises
    finally:
        session.close()


# ---------------------------------------------------------------- the notebook's own section cells
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
    outputs = [kernel.run(cell.source) for cell in section_code_cells(notebook, 2)]
    assert any("Section 2 FAILED: NameError" in text for text in outputs), outputs
    assert any("not run: section 2 FAILED" in text for text in outputs[2:]), "later cells must say they did not run"
    kernel.run("# @title (what section 1 leaves behind in CUPTI mode)\nNCU_ONLY_SKIP = 'no ncu'")
    for cell in section_code_cells(notebook, 4):
        kernel.run(cell.source)
    assert kernel.value("SECTIONS[4]['status']") == "SKIPPED", "a failure must not leak into the next section"
    kernel.run("# @title (headless runs)\nSTRICT = True")
    with pytest.raises(CellError) as raised:
        kernel.run(cell_by_id(notebook, "summary-code").source)
    assert "section 2 FAILED: NameError" in raised.value.evalue, raised.value.evalue
    assert "section 3 NOT RUN" in raised.value.evalue, "sections whose cells never ran must fail strict mode too"
