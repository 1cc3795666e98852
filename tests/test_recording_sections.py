"""What a recording says of each section it recorded (the page and README's table read this, not printed text), and
which cells a recorder runs for the sections it records."""

import builtins

import pytest
import record_cupti
import recordings
from support import free_names, module_level_names

from plumbing.cells import CUPTI_SECTIONS, SECTION_ONE_NAMES, SECTION_PLAN


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


def test_the_ncu_recorder_on_a_machine_without_a_gpu_says_so_and_writes_nothing(tmp_path):
    import os
    import subprocess
    import sys

    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")  # a driver tool that finds no GPU
    (fake_bin / "nvidia-smi").chmod(0o755)
    dest = tmp_path / "dest"
    environ = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, str(recordings.ROOT / "scripts" / "record_ncu.py"), "--dest", str(dest), "--sections", "2"],
        capture_output=True, text=True, env=environ, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "no NVIDIA GPU here" in done.stderr, (
        f"record_ncu.py without a GPU must stop with exit 2 and say so, not a traceback: {done.returncode} "
        f"{done.stderr[-600:]}"
    )
    assert "Traceback" not in done.stderr and not dest.exists(), "nothing may be written for a recording never made"


# ---------------------------------------------------------------- the plan of a section recorded alone
# What every cell has without an earlier cell binding it: Python's builtins and what IPython gives each cell.
GIVEN_BY_PYTHON = set(dir(builtins)) | {"display", "get_ipython"}
PLANS = {
    "record_cupti.py": (lambda cells, number: record_cupti.plan(cells, [number]), set(), sorted(CUPTI_SECTIONS)),
    # record_ncu.py makes section 1's names itself (section_one_names) instead of running section 1's cells
    "record_ncu.py": (lambda cells, number: recordings.plan(cells, [number]), set(SECTION_ONE_NAMES), SECTION_PLAN),
}


@pytest.mark.parametrize(
    ("recorder", "number"), [(recorder, number) for recorder, (_, _, numbers) in PLANS.items() for number in numbers]
)
def test_a_section_recorded_alone_runs_first_a_cell_that_binds_each_name_its_cells_read(recorder, number):
    """`--sections N`: every name section N's cells read from an earlier cell is bound by a cell the plan runs
    before the section (section 8 reads s2-tools' out_prefix and section 3's means). A run cell of a section read
    from a recording binds there what its notebook source binds."""
    plan, made_by_the_recorder, _ = PLANS[recorder]
    cells = recordings.load_cells()
    steps = plan(cells, number)
    first = next(index for index, (section, _, _) in enumerate(steps) if section == number)
    assert first > 0, f"{recorder} --sections {number}: the section's cells must come after what they read"
    before = set().union(*(module_level_names(recordings.cell_source(cells, step[1])) for step in steps[:first]))
    sources = {
        cell_id: recordings.cell_source(cells, cell_id) for cell_id, _ in recordings.section_steps(cells, number)
    }
    own = set().union(*(module_level_names(source) for source in sources.values()))  # a function may read a later one
    available = before | own | made_by_the_recorder | GIVEN_BY_PYTHON
    for cell_id, source in sources.items():
        unbound = free_names(source) - available
        binders = {name: [c["id"] for c in cells if c["type"] == "code" and name in module_level_names(c["source"])]
                   for name in sorted(unbound)}  # fmt: skip
        assert not unbound, (
            f"{recorder} --sections {number}: cell {cell_id} reads {binders} (name: the cells that bind it), and its "
            "plan (scripts/recordings.py plan) runs none of those cells before the section: a NameError on the GPU "
            "machine. Add the name to SHARED_NAMES or the section to SECTION_DEPENDENCY in plumbing/cells.py"
        )


def test_the_recording_keeps_a_prelude_cell_under_no_section_and_leaves_out_the_cells_of_a_section_it_read():
    run = {"source": "x = 1\n", "output": "", "variables": {"x": 1}}
    prelude, read, gpu = SECTION_PLAN[2]["define"][0], SECTION_PLAN[3]["run"][0], SECTION_PLAN[8]["gpu_define"][0]
    runs = {c: {**run, "role": r} for c, r in ((prelude, "prelude"), (read, "recorded run"), (gpu, "gpu_define"))}
    cells = recordings.recorded_cells(runs, "c" * 40, "t")
    assert sorted(cells) == sorted([prelude, gpu]), (
        f"a cell of a section read from a recording keeps that recording's entry, not one made here: {sorted(cells)}"
    )
    assert (cells[prelude]["section"], cells[gpu]["section"]) == (None, 8), (
        "a shared (prelude) cell belongs to no section, so that recording one section keeps the others' entries"
    )
