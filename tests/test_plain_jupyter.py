"""With the notebook's folded cells loaded, a cell behaves as in plain IPython.

One real kernel (no cell ids sent, as Colab and nbclient send none) runs the notebook's own harness and
setup-helper cells, section 1's names from the committed CUPTI recording (no GPU here), and sections' own
analysis and verdict cells. Then it runs what a learner types: %timeit, %%time, %%capture, a trailing `;`,
`_` and `Out`, a cell that raises. Each test asserts what the front end receives (streams, results, the reply's
status, the traceback). Section status comes from the verdict cells: ok once a section's verdict ran, SKIPPED for
a section that needs Nsight Compute under CUPTI, NOT RUN otherwise; the summary cell writes it to summary.json.
"""

from __future__ import annotations

import re
import time

import pytest
import recordings
from kernel_session import KernelSession
from support import cell_by_id, section_code_cells

from plumbing.cells import HARNESS, NCU_ONLY_SECTIONS, SECTION_PLAN, SETUP_HELPERS, SUMMARY
from plumbing.executed_run import run_problems

FOLDERS = recordings.recording_folders("cupti")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Reply:
    """Everything a front end receives for one cell: streams, results and displays, errors, the reply's status."""

    def __init__(self):
        self.stdout, self.stderr, self.status = "", "", ""
        self.results: list[str] = []  # execute_result and display_data, as text/plain
        self.errors: list[dict] = []
        self.content: dict = {}

    @property
    def traceback(self) -> str:
        return ANSI.sub("", "\n".join(line for error in self.errors for line in error["traceback"]))


def front_end(session: KernelSession, code: str, timeout: float = 120) -> Reply:
    """Send code as Colab does (no cell id) and collect every output message and the execute_reply."""
    client = session.client
    msg_id = client.execute(code, store_history=True, allow_stdin=False, stop_on_error=True)
    reply, deadline = Reply(), time.monotonic() + timeout
    while True:
        message = client.get_iopub_msg(timeout=max(deadline - time.monotonic(), 1))
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        kind, body = message["header"]["msg_type"], message["content"]
        if kind == "stream":
            setattr(reply, body["name"], getattr(reply, body["name"]) + body["text"])
        elif kind in ("execute_result", "display_data"):
            reply.results.append(body["data"].get("text/plain", ""))
        elif kind == "error":
            reply.errors.append(body)
        elif kind == "status" and body["execution_state"] == "idle":
            break
    while True:
        shell = client.get_shell_msg(timeout=max(deadline - time.monotonic(), 1))
        if shell["parent_header"].get("msg_id") == msg_id:
            reply.content, reply.status = shell["content"], shell["content"]["status"]
            return reply


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


def test_timeit_prints_one_line_and_times_only_the_statement(learner):
    reply = front_end(learner, "%timeit -n 1000 -r 3 sum(range(20))")
    assert reply.status == "ok" and not reply.errors, reply.traceback
    assert reply.results == [], f"%timeit must display nothing per loop; it displayed {len(reply.results)} values"
    lines = [line for line in reply.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and "per loop" in lines[0], f"%timeit should print one line, printed:\n{reply.stdout[:500]}"
    assert per_loop_seconds(lines[0]) < 50e-6, f"sum(range(20)) cannot take {lines[0]}: something wraps the statement"


def test_timeit_of_a_raising_statement_is_an_error_and_reports_no_time(learner):
    reply = front_end(learner, "%timeit -n 5 -r 1 1 / 0")
    assert reply.status == "error" and reply.content["ename"] == "ZeroDivisionError", reply.content
    assert "per loop" not in reply.stdout and "FAILED" not in reply.stdout, reply.stdout


def test_cell_magics_time_and_capture_work_as_in_ipython(learner):
    timed = front_end(learner, "%%time\nsum(range(10))")
    assert timed.status == "ok" and "Wall time" in timed.stdout, timed.stdout
    assert timed.results == ["45"], f"%%time must still show the cell's value: {timed.results}"
    timed_error = front_end(learner, "%%time\n1 / 0")
    assert timed_error.status == "error", "a cell timed with %%time that raises must still fail for the front end"
    captured = front_end(learner, "%%capture kept\nprint('kept for later')\n")
    assert captured.stdout == "" and captured.results == [], "%%capture must hide the cell's output"
    assert learner.value("kept.stdout") == "kept for later\n"


def test_a_trailing_semicolon_hides_the_value_and_underscore_holds_the_last_one(learner):
    hidden = front_end(learner, "[1, 2, 3];")
    assert hidden.results == [], f"a trailing ';' must hide the value, it showed {hidden.results}"
    shown = front_end(learner, "6 * 7")
    assert shown.results == ["42"], shown.results
    underscore = front_end(learner, "_ + 1")
    assert underscore.results == ["43"], f"_ must hold the last value shown (42): {underscore.results}"
    number = shown.content["execution_count"]
    assert front_end(learner, f"Out[{number}]").results == ["42"], "Out must hold each shown value by its number"


def test_a_raising_cell_fails_for_the_front_end_and_its_traceback_points_at_the_line_that_raised(learner):
    reply = front_end(learner, "before = 1\nraise ValueError('the learner broke this')\nafter = 2\n")
    assert reply.status == "error", "a raising cell must fail the way that stops Run all (execute_reply 'error')"
    assert reply.content["ename"] == "ValueError" and len(reply.errors) == 1, reply.content
    assert re.search(r"----> 2 raise ValueError", reply.traceback), (
        f"traceback must point at line 2:\n{reply.traceback}"
    )
    assert learner.value("'after' in globals()") is False


# ---------------------------------------------------------------- section status
def test_a_section_is_not_run_until_its_verdict_runs_then_ok_with_its_figure_and_finding_once(notebook, learner):
    assert learner.value("section_entry(2)['status']") == "NOT RUN", "a section is NOT RUN until its verdict cell"
    learner.run(recordings.inject_source(SECTION_PLAN[2]["run"][0]))  # what section 2's run cell bound on the GPU
    for _ in range(2):  # the section's verdict cell (its last code cell) run twice (a learner runs it again)
        printed = front_end(learner, section_code_cells(notebook, 2)[-1].source).stdout.splitlines()[-1]
    entry, gpu = learner.value("section_entry(2)"), learner.value("ENVIRONMENT['gpu']")
    assert entry["status"] == "ok" and printed == f"On this {gpu}: {entry['headline']}", (
        f"the verdict's finding, printed, is the headline, kept once when the cell runs again: {entry}"
    )
    names = learner.value("[f['name'] for f in FIGURES if f['section'] == 2]")
    assert names == ["fp32 product, n=2048"], f"a second run of the verdict cell must replace its figure: {names}"


def test_a_section_that_needs_nsight_compute_is_skipped_under_cupti_and_its_cells_do_nothing(notebook, learner):
    assert learner.value("USE_NCU") is False, "the CUPTI recording's section 1 names"
    for cell in (cell_by_id(notebook, SECTION_PLAN[4]["run"][0]), section_code_cells(notebook, 4)[-1]):  # the verdict
        reply = front_end(learner, cell.source)
        assert reply.status == "ok" and reply.stdout == "", f"under CUPTI {cell.id} must do nothing: {reply.stdout}"
    assert learner.value("'condition_frames' in globals()") is False
    assert learner.value("section_entry(4)['status']") == "SKIPPED", "under CUPTI no verdict means SKIPPED here"


def test_the_summary_cell_writes_every_section_and_never_raises_and_not_run_sections_fail_the_run(notebook, learner):
    summary = front_end(learner, cell_by_id(notebook, SUMMARY).source)
    assert summary.status == "ok", f"the summary cell must never raise: {summary.traceback}"
    written = learner.value("json.loads((OUT_DIR / 'summary.json').read_text())")
    assert [s["number"] for s in written["sections"]] == list(range(1, 11)), "summary.json names every section"
    failing = {int(found[1]) for problem in run_problems(written) if (found := re.match(r"section (\d+) ", problem))}
    assert {3, 5, 8} <= failing and not failing & NCU_ONLY_SECTIONS, (
        f"sections without a verdict fail the run, those SKIPPED under CUPTI do not: {run_problems(written)}"
    )
