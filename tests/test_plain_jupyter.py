"""With the folded cells loaded, a cell behaves as in plain IPython (one real kernel, no cell ids sent)."""

import re

import pytest
from kernel_session import KernelSession
from support import cell_source, load_cells

from plumbing.cells import HARNESS, SECTION_ONE_CELLS, SECTION_PLAN, SETUP_HELPERS

CELLS = load_cells()


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plain")
    session = KernelSession(env={"NSPY_TUTORIAL_OUT": str(folder / "out"), "MPLBACKEND": "Agg"}, cwd=folder)
    for cell_id in (HARNESS, SETUP_HELPERS):  # a failed set-up's kernel is killed by KernelSession's finaliser
        session.run(cell_source(CELLS, cell_id))
    session.run("USE_NCU, gpu = False, 'Tesla T4'")  # section 1's names, as its cells leave them without a GPU
    session.run(cell_source(CELLS, SECTION_ONE_CELLS["magic"]))
    yield session
    session.close()


def test_magics_semicolon_underscore_and_a_raising_cell_behave_as_in_plain_ipython(learner):
    reply = learner.execute("%timeit -n 1000 -r 3 sum(range(20))")
    lines = [line for line in reply.stdout.splitlines() if "per loop" in line]  # under load IPython adds a note
    assert reply.status == "ok" and reply.results == [] and len(lines) == 1, f"%timeit: one line, no values: {reply}"
    assert re.match(r"\s*[\d.]+ (ns|µs|μs|us) ", lines[0]), f"sum(range(20)) cannot take {lines[0]}: something wraps it"
    failed = learner.execute("%timeit -n 5 -r 1 1 / 0")
    assert failed.status == "error" and "per loop" not in failed.stdout, "a raising %timeit must fail"
    timed = learner.execute("%%time\nsum(range(10))")
    assert "Wall time" in timed.stdout and timed.results == ["45"], f"%%time must show the value: {timed.results}"
    assert learner.execute("[1, 2, 3];").results == [], "a trailing ';' must hide the value"
    shown = learner.execute("6 * 7")
    assert shown.results == ["42"] and learner.execute("_ + 1").results == ["43"], "_ must hold the last value"
    reply = learner.execute("before = 1\nraise ValueError('the learner broke this')\nafter = 2\n")
    assert reply.status == "error" and reply.content["ename"] == "ValueError" and len(reply.errors) == 1, reply.content
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(line for error in reply.errors for line in error["traceback"]))
    assert re.search(r"----> 2 raise ValueError", traceback), f"point at line 2:\n{traceback}"
    assert learner.value("'after' in globals()") is False
    assert learner.execute("print(before + 1)").stdout == "2\n", "the cell after an error must run"


def test_a_section_that_needs_nsight_compute_is_skipped_under_cupti_and_its_cells_say_so_and_do_nothing(learner):
    learner.execute("USE_NCU = False")  # as section 1 ends without Nsight Compute
    for cell_id in (SECTION_PLAN[4]["run"][0], "s4-verdict"):
        reply = learner.execute(cell_source(CELLS, cell_id))
        said = reply.stdout == "Skipped: this cell needs Nsight Compute, and this runtime measures with CUPTI.\n"
        assert reply.status == "ok" and said, f"under CUPTI {cell_id} must only say it skipped: {reply.stdout}"
    assert learner.value("'frames' in globals()") is False, "s4-run's frames: the skipped cell must not run"


def test_a_needs_ncu_cell_runs_as_typed_under_nsight_compute(learner):
    learner.execute("USE_NCU = True")
    shown = learner.execute("%%needs_ncu\nunder_magic = 6 * 7\nunder_magic")
    assert shown.status == "ok" and shown.results == ["42"], f"the cell's last value must show: {shown.results}"
    assert learner.execute("_ + 1").results == ["43"], "_ must hold the value a %%needs_ncu cell showed"
    assert learner.execute("%%needs_ncu\n[1, 2];").results == [], "a trailing ';' must hide the value"
    failed = learner.execute("%%needs_ncu\nbefore_error = 1\nraise ValueError('broken under the magic')\n")
    assert failed.status == "error", "a failing %%needs_ncu cell must stop Run all (and fail nbmake) there"
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(line for error in failed.errors for line in error["traceback"]))
    assert re.search(r"----> 2 raise ValueError", traceback), f"point at the learner's line 2:\n{traceback}"
    assert traceback.count("Traceback") <= 1 and traceback.count("ValueError") <= 3, f"one traceback:\n{traceback}"
