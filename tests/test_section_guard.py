"""The section guard, in a real kernel running the notebook's own cells, as a learner uses Colab.

It never traps a learner: every cell runs, a corrected one after a failure too; an error is shown with its full
traceback as an error output, charged to the section of the cell that raised, and Run all goes on to the summary,
which lists the section. A learner's own '# @title' cell is guarded like any other. Under CUPTI the cells that
need Nsight Compute say so in their first line and run nothing. Cells run out of order say what to run first.
Last, the notebook's own section cells without a GPU: in CUPTI mode exactly the sections that need Nsight Compute
are SKIPPED with one short line, and a section that breaks fails alone.
"""

from __future__ import annotations

import json

import notebook_format
import pytest
from kernel_session import CellError, KernelSession
from support import NOTEBOOK, cell_by_id, section_code_cells

from plumbing.cells import CUPTI_SECTIONS, NCU_ONLY_CELL_MARK, NCU_ONLY_SECTIONS


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


SECTION_ONE_STAND_IN = "# @title (section 1 as far as it runs without a GPU)\nbegin_section(1, 'Set up', guarded=False)"


def statuses(kernel):
    return kernel.value("{number: info['status'] for number, info in SECTIONS.items()}")


# ---------------------------------------------------------------- learner sequences, with the notebook's cells
def test_a_cell_run_after_a_failure_runs(notebook, kernel):
    kernel.run(cell_by_id(notebook, "s2-open").source)
    failed = kernel.execute(cell_by_id(notebook, "s2-define").source)  # no nsight without a GPU: NameError
    assert failed.looks_failed and statuses(kernel)["2"] == "FAILED", failed
    after = kernel.execute("print('a plain print after the failure')")
    assert after.stdout == "a plain print after the failure\n", f"a cell after a failure must run: {after}"
    corrected = kernel.execute("def add_kernels(x, y):\n    return x + y\n\nprint(add_kernels(40, 2))")
    assert corrected.stdout == "42\n" and not corrected.looks_failed, corrected


def test_an_error_is_charged_to_the_section_of_the_cell_that_raised(notebook, kernel):
    kernel.run(cell_by_id(notebook, "s2-open").source)
    own_cell = "ratio = 1 / divisor"  # a learner's cell in section 2, run first while it works
    kernel.run("divisor = 4")
    kernel.run(own_cell)
    kernel.run(cell_by_id(notebook, "s3-open").source)
    kernel.run("divisor = 0")
    again = kernel.execute(own_cell)  # run again after section 3 opened: it raises now
    assert again.looks_failed and "Section 2 is marked FAILED (ZeroDivisionError" in again.stdout, again
    assert statuses(kernel) == {"2": "FAILED", "3": "ok"}, "the error belongs to section 2, not to the one opened last"


def test_a_front_end_cell_id_decides_the_section(notebook, kernel):
    kernel.run(cell_by_id(notebook, "s2-open").source)
    kernel.run(cell_by_id(notebook, "s3-open").source)
    failed = kernel.execute(cell_by_id(notebook, "s2-define").source, cell_id="s2-define")  # as JupyterLab sends it
    assert "Section 2 is marked FAILED" in failed.stdout and statuses(kernel) == {"2": "FAILED", "3": "ok"}


def test_a_failing_cell_shows_its_traceback_says_it_failed_and_run_all_reaches_the_summary(notebook, kernel):
    kernel.run(cell_by_id(notebook, "s2-open").source)
    failed = kernel.execute(cell_by_id(notebook, "s2-define").source)
    assert failed.status == "ok", "the reply must stay ok, or the front end stops Run all here"
    (error,) = failed.errors
    trace = "\n".join(error["traceback"])
    assert error["ename"] == "NameError" and "@nsight.analyze.kernel(" in trace and "line 6" in trace, trace
    assert "This cell FAILED. Section 2 is marked FAILED (NameError: name 'nsight' is not defined)" in failed.stdout
    for cell in section_code_cells(notebook, 3):  # Run all goes on with the next section
        kernel.execute(cell.source)
    summary = kernel.execute(cell_by_id(notebook, "summary-code").source)
    assert summary.status == "ok" and "not clean" in summary.stdout and "section 2 FAILED" in summary.stdout, summary


def test_headless_failures_go_to_stderr_and_strict_mode_fails_at_the_summary(notebook, tmp_path):
    env = {"NSPY_TUTORIAL_OUT": str(tmp_path / "out"), "NSPY_TUTORIAL_STRICT": "1"}
    with KernelSession(env=env, cwd=tmp_path) as session:
        session.run(cell_by_id(notebook, "harness").source)
        session.run(cell_by_id(notebook, "s2-open").source)
        failed = session.execute(cell_by_id(notebook, "s2-define").source)
        # nbmake stops at any cell with an error output; the summary must still run and fail the run.
        assert failed.status == "ok" and not failed.errors and "NameError" in failed.stderr, failed
        with pytest.raises(CellError, match="section 2 FAILED: NameError"):
            session.run(cell_by_id(notebook, "summary-code").source)


def test_a_learners_own_title_cell_is_guarded_like_any_other(notebook, kernel):
    kernel.run(cell_by_id(notebook, "s2-open").source)
    own = kernel.execute("# @title My own check\nraise ValueError('my check failed')")
    assert own.status == "ok" and own.looks_failed, "a learner's '# @title' cell must not stop Run all"
    assert kernel.value("SECTIONS[2]['reason']") == "ValueError: my check failed"


def test_cells_needing_nsight_compute_say_so_first_and_run_nothing_under_cupti(notebook, kernel):
    kernel.run(SECTION_ONE_STAND_IN + "\nNCU_ONLY_SKIP = 'needs Nsight Compute'")
    for number in sorted(NCU_ONLY_SECTIONS):
        cells = section_code_cells(notebook, number)
        visible = [cell for cell in cells if not cell.source.startswith("# @title")]
        unmarked = [cell.get("id") for cell in visible if not cell.source.startswith(NCU_ONLY_CELL_MARK + "\n")]
        assert not unmarked, f"{unmarked} need Nsight Compute but do not say so in their first line"
        runs = [kernel.execute(cell.source) for cell in cells]
        assert not any(run.errors or run.status != "ok" for run in runs), "a skipped cell must not fail"
        assert all(run.stdout == "" for run in runs[1:]), "the opener says SKIPPED once; the cells stay silent"
        own = kernel.execute("print('my own cell in this section')")
        assert own.stdout == "my own cell in this section\n", "a learner's own cell in a SKIPPED section runs"


def test_a_cell_run_before_section_1_says_to_run_section_1_first(notebook, kernel):
    opener = kernel.execute(cell_by_id(notebook, "s4-open").source)  # needs NCU_ONLY_SKIP from section 1
    assert opener.status == "error", "nothing works without section 1: this stops Run all"
    assert "'NCU_ONLY_SKIP' is made by section 1 (Set up): run section 1 first" in opener.stdout, opener


def test_a_cell_of_section_1_run_out_of_order_says_to_run_section_1_in_order(notebook, kernel):
    kernel.run(SECTION_ONE_STAND_IN)  # section 1 opened, but its settings cell never ran
    probe = kernel.execute(cell_by_id(notebook, "s1-probe-code").source)
    assert probe.status == "error", "an error in section 1 stops Run all: nothing after a broken set-up can work"
    assert "Run the cells of section 1 in order, from its first cell" in probe.stdout, probe


def test_a_cell_run_before_an_earlier_section_names_that_section(notebook, kernel):
    kernel.run(SECTION_ONE_STAND_IN)
    kernel.run(cell_by_id(notebook, "s3-open").source)
    early = kernel.execute(cell_by_id(notebook, "s3-run").source)  # section 2 never ran
    assert "Section 2 of this notebook did not run in this session" in early.stdout, early
    assert early.status == "ok" and early.looks_failed


def test_a_second_run_all_guards_each_cell_once(notebook, kernel):
    kernel.run(cell_by_id(notebook, "harness").source)  # Run all again: the harness cell runs a second time
    kernel.run(cell_by_id(notebook, "s2-open").source)
    failed = kernel.execute("raise KeyError('x')")
    assert failed.stdout.count("This cell FAILED") == 1 and len(failed.errors) == 1, failed


# ---------------------------------------------------------------- the guard's mechanics
def test_guarded_cells_keep_their_names_and_show_their_last_value(kernel):
    kernel.run(_open(2))
    kernel.run("def scaled(x):\n    return 3 * x\n\nresult = scaled(14)")
    assert kernel.value("result") == 42 and kernel.value("scaled.__name__") == "scaled"


def test_a_skipped_section_runs_only_the_cells_that_need_nsight_compute_not(kernel):
    kernel.run("# @title set-up\nNCU_ONLY_SKIP = 'needs Nsight Compute'")
    opened = kernel.run(_open(4, "four", skip_reason="needs Nsight Compute"))
    assert opened.count("SKIPPED") == 1 and "see the banner" in opened
    assert kernel.run(f"{NCU_ONLY_CELL_MARK}\nprint('MUST NOT RUN')") == "", "a marked cell runs nothing under CUPTI"
    assert kernel.run("print('mine')") == "mine\n", "an unmarked cell runs"
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


@pytest.mark.parametrize(("strict_value", "raises"), [("1", True), ("0", False), (None, False), ("", False)])
def test_strict_mode_from_the_environment_variable_to_the_summary_cell(notebook, tmp_path, strict_value, raises):
    env = {"NSPY_TUTORIAL_OUT": str(tmp_path / "out")}
    if strict_value is not None:
        env["NSPY_TUTORIAL_STRICT"] = strict_value
    with KernelSession(env=env, cwd=tmp_path) as session:
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


# ---------------------------------------------------------------- bad settings, said in the harness cell
@pytest.mark.parametrize("value", ["yes", "true", "2"])
def test_a_strict_setting_that_is_not_0_or_1_is_an_error_that_names_it(notebook, tmp_path, value):
    env = {"NSPY_TUTORIAL_OUT": str(tmp_path / "out"), "NSPY_TUTORIAL_STRICT": value}
    with KernelSession(env=env, cwd=tmp_path) as session, pytest.raises(CellError) as raised:
        session.run(cell_by_id(notebook, "harness").source)
    assert raised.value.ename == "ValueError" and f"NSPY_TUTORIAL_STRICT={value!r} is neither 1 nor 0" in str(
        raised.value
    ), raised.value


@pytest.mark.parametrize("kind", ["under /proc", "a file"])
def test_an_unusable_output_folder_names_the_setting_and_the_fix(notebook, tmp_path, kind):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    value = {"under /proc": "/proc/nspy_no_such/x", "a file": str(a_file)}[kind]
    with KernelSession(env={"NSPY_TUTORIAL_OUT": value}, cwd=tmp_path) as session, pytest.raises(CellError) as error:
        session.run(cell_by_id(notebook, "harness").source)
    message = error.value.evalue
    said = {"under /proc": "cannot write there (No such file or directory)", "a file": "that is a file, not a folder"}
    assert f"NSPY_TUTORIAL_OUT={value}: {said[kind]}" in message and "Set NSPY_TUTORIAL_OUT to a" in message


def test_the_format_tool_keeps_the_nsight_compute_line_on_those_cells(tmp_path):
    notebook = json.loads(NOTEBOOK.read_text())
    cell = next(cell for cell in notebook["cells"] if cell.get("id") == "s6-run")
    cell["source"] = "".join(cell["source"]).split("\n", 1)[1]  # someone dropped the first line
    path = tmp_path / "edited.ipynb"
    path.write_text(json.dumps(notebook))
    assert any("s6-run" in problem and "needs Nsight Compute" in problem for problem in notebook_format.problems(path))
    assert notebook_format.main(["--fix", str(path)]) == 0 and notebook_format.problems(path) == []
    fixed = next(cell for cell in json.loads(path.read_text())["cells"] if cell.get("id") == "s6-run")
    assert "".join(fixed["source"]).startswith(NCU_ONLY_CELL_MARK + "\n")


# ---------------------------------------------------------------- the notebook's sections without a GPU
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
