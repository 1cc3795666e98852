"""With the notebook's folded cells loaded, a cell behaves as in plain IPython: one real kernel (no cell ids sent,
as Colab sends none) runs the harness and setup-helper cells and section 1's names from the committed CUPTI
recording, then what a learner types (%timeit, %%time, %%capture, `;`, `_`, Out, a raising cell) and sections'
verdict and summary cells. Each test asserts what the front end receives."""

from __future__ import annotations

import re

import pytest
import recordings
from kernel_session import KernelSession
from support import cell_by_id, section_code_cells

from plumbing.cells import HARNESS, NCU_ONLY_SECTIONS, SECTION_PLAN, SETUP_HELPERS, SUMMARY
from plumbing.executed_run import run_problems

FOLDERS = recordings.recording_folders("cupti")


def traceback(reply) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(line for error in reply.errors for line in error["traceback"]))


@pytest.fixture(scope="module")
def learner(notebook, tmp_path_factory):
    """A kernel with the folded cells loaded and section 1's names from a CUPTI recording."""
    if not FOLDERS:
        pytest.skip("no committed CUPTI recording (docs/verified/*-cupti-recording): record one with record_cupti.py")
    folder = tmp_path_factory.mktemp("plain")
    session = KernelSession(env={"NSPY_TUTORIAL_OUT": str(folder / "out"), "MPLBACKEND": "Agg"}, cwd=folder)
    try:
        for cell_id in (HARNESS, SETUP_HELPERS):
            session.run(cell_by_id(notebook, cell_id).source)
        session.run(recordings.cpu_section_one_source(FOLDERS[0]))
    except BaseException:
        session.close()
        raise
    yield session
    session.close()


# ---------------------------------------------------------------- magics, `;`, `_`, errors
def per_loop_seconds(line: str) -> float:
    """'354 ns ± 2.1 ns per loop (mean ± std. dev. of 3 runs, 1,000 loops each)' -> 3.54e-07."""
    value, unit = re.match(r"\s*([\d.]+)\s*(ns|µs|us|ms|s)\b", line).groups()
    return float(value) * {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def test_timeit_prints_one_line_times_only_the_statement_and_a_raising_one_is_an_error(learner):
    reply = learner.execute("%timeit -n 1000 -r 3 sum(range(20))")
    lines = [line for line in reply.stdout.splitlines() if "per loop" in line]  # under load IPython adds a note
    assert reply.status == "ok" and reply.results == [] and len(lines) == 1, f"one line, no values: {reply}"
    assert per_loop_seconds(lines[0]) < 50e-6, f"sum(range(20)) cannot take {lines[0]}: something wraps the statement"
    failed = learner.execute("%timeit -n 5 -r 1 1 / 0")
    assert failed.status == "error" and failed.content["ename"] == "ZeroDivisionError", failed.content
    assert "per loop" not in failed.stdout, failed.stdout


def test_cell_magics_time_and_capture_work_as_in_ipython(learner):
    timed = learner.execute("%%time\nsum(range(10))")
    assert timed.status == "ok" and "Wall time" in timed.stdout, timed.stdout
    assert timed.results == ["45"], f"%%time must still show the cell's value: {timed.results}"
    timed_error = learner.execute("%%time\n1 / 0")
    assert timed_error.status == "error", "a cell timed with %%time that raises must still fail for the front end"
    captured = learner.execute("%%capture kept\nprint('kept for later')\n")
    assert captured.stdout == "" and captured.results == [], "%%capture must hide the cell's output"
    assert learner.value("kept.stdout") == "kept for later\n"


def test_a_trailing_semicolon_hides_the_value_and_underscore_holds_the_last_one(learner):
    hidden = learner.execute("[1, 2, 3];")
    assert hidden.results == [], f"a trailing ';' must hide the value, it showed {hidden.results}"
    shown = learner.execute("6 * 7")
    assert shown.results == ["42"], shown.results
    underscore = learner.execute("_ + 1")
    assert underscore.results == ["43"], f"_ must hold the last value shown (42): {underscore.results}"
    number = shown.content["execution_count"]
    assert learner.execute(f"Out[{number}]").results == ["42"], "Out must hold each shown value by its number"


def test_a_raising_cell_fails_for_the_front_end_and_its_traceback_points_at_the_line_that_raised(learner):
    reply = learner.execute("before = 1\nraise ValueError('the learner broke this')\nafter = 2\n")
    assert reply.status == "error", "a raising cell must fail the way that stops Run all (execute_reply 'error')"
    assert reply.content["ename"] == "ValueError" and len(reply.errors) == 1, reply.content
    assert re.search(r"----> 2 raise ValueError", traceback(reply)), (
        f"traceback must point at line 2:\n{traceback(reply)}"
    )
    assert learner.value("'after' in globals()") is False


# ---------------------------------------------------------------- section status
def test_a_section_that_needs_nsight_compute_is_skipped_under_cupti_and_its_cells_do_nothing(notebook, learner):
    assert learner.value("USE_NCU") is False, "the CUPTI recording's section 1 names"
    for cell in (cell_by_id(notebook, SECTION_PLAN[4]["run"][0]), section_code_cells(notebook, 4)[-1]):  # the verdict
        reply = learner.execute(cell.source)
        assert reply.status == "ok" and reply.stdout == "", f"under CUPTI {cell.id} must do nothing: {reply.stdout}"
    assert learner.value("'condition_frames' in globals()") is False
    assert learner.value("section_entry(4)['status']") == "SKIPPED", "under CUPTI no verdict means SKIPPED here"


def test_the_summary_cell_writes_every_section_and_never_raises_and_not_run_sections_fail_the_run(notebook, learner):
    summary = learner.execute(cell_by_id(notebook, SUMMARY).source)
    assert summary.status == "ok", f"the summary cell must never raise: {traceback(summary)}"
    written = learner.value("json.loads((OUT_DIR / 'summary.json').read_text())")
    assert [s["number"] for s in written["sections"]] == list(range(1, 11)), "summary.json names every section"
    failing = {int(found[1]) for problem in run_problems(written) if (found := re.match(r"section (\d+) ", problem))}
    assert {3, 5, 8} <= failing and not failing & NCU_ONLY_SECTIONS, (
        f"sections without a verdict fail the run, those SKIPPED under CUPTI do not: {run_problems(written)}"
    )
