"""The section guard, in a real kernel running the notebook's own harness cell: a raising cell fails its section and
Run all goes on, a SKIPPED or FAILED section runs nothing more, and strict mode is read from its environment variable.
"""

from __future__ import annotations

import json

import pytest
from conftest import cell_by_id
from kernel_session import CellError, KernelSession


@pytest.fixture
def out_dir(tmp_path):
    return tmp_path / "out"


@pytest.fixture
def kernel(notebook, out_dir, tmp_path):
    with KernelSession(env={"NSPY_TUTORIAL_OUT": str(out_dir), "NSPY_TUTORIAL_STRICT": ""}, cwd=tmp_path) as session:
        session.run(cell_by_id(notebook, "harness").source)
        yield session


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
