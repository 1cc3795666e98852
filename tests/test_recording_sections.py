"""What a recording keeps of each section, and which cells the recorder runs for the sections it records."""

import builtins

import pytest
import recordings
from support import free_names, module_level_names

from plumbing.cells import SECTION_ONE_NAMES, SECTION_PLAN


@pytest.mark.parametrize(
    ("status", "failed", "expected"),
    [
        ({8: {"status": "ok", "headline": "h"}}, {8: "s8-x"}, ("FAILED", "h", "s8-x")),  # whatever its status cell said
        ({8: {"status": "ok", "headline": "spread"}}, {}, ("ok", "spread", None)),
        ({}, {}, ("NOT RUN", "", None)),  # no status and no failure: it did not finish
    ],
)
def test_a_sections_entry_is_failed_naming_the_cell_that_raised_else_what_its_own_cells_recorded(
    status, failed, expected
):
    entry = recordings.section_entry(8, status, failed, {"wall_s": 1.5}, "c", "t")
    assert (entry["status"], entry.get("headline") or "", entry["failed_cell"]) == expected, entry
    assert entry["cost"] == {"wall_s": 1.5} and entry["notebook_commit"] == "c", entry
    assert not failed or failed[8] in entry["reason"], f"the reason must name the cell that failed: {entry['reason']!r}"


def test_the_recording_keeps_a_prelude_cell_under_no_section_and_leaves_out_the_cells_of_a_section_it_read():
    run = {"source": "x = 1\n", "output": "", "variables": {"x": 1}}
    prelude, read, gpu = SECTION_PLAN[2]["define"][0], SECTION_PLAN[3]["run"][0], SECTION_PLAN[8]["gpu_define"][0]
    runs = {c: {**run, "role": r} for c, r in ((prelude, "prelude"), (read, "recorded run"), (gpu, "gpu_define"))}
    cells = recordings.recorded_cells(runs, "c" * 40, "t")
    assert sorted(cells) == sorted([prelude, gpu]), f"a section read from a recording keeps that one's: {sorted(cells)}"
    assert (cells[prelude]["section"], cells[gpu]["section"]) == (None, 8), "a shared (prelude) cell has no section"


def test_a_run_cells_injection_binds_exactly_what_that_cell_bound_on_the_gpu_machine():
    recording = recordings.load_recording(recordings.recording_folders()[0])
    for cell_id, entry in recording["cells"].items():
        if entry["role"] == "run":
            namespace = {"RECORDING": recording}
            exec(recordings.inject_source(cell_id), namespace)
            assert set(namespace) - {"RECORDING", "__builtins__"} == set(entry["variables"]), cell_id


@pytest.mark.parametrize("number", SECTION_PLAN)
def test_a_section_recorded_alone_runs_first_a_cell_that_binds_each_name_its_cells_read(number):
    cells = recordings.load_cells()
    steps = recordings.plan(cells, [number])
    first = next(index for index, (section, _, _) in enumerate(steps) if section == number)
    before = set().union(*(module_level_names(recordings.cell_source(cells, step[1])) for step in steps[:first]))
    sources = {
        cell_id: recordings.cell_source(cells, cell_id) for cell_id, _ in recordings.section_steps(cells, number)
    }
    available = before | set().union(*map(module_level_names, sources.values())) | set(SECTION_ONE_NAMES)
    available |= set(dir(builtins)) | {"display", "get_ipython"}  # what IPython gives every cell
    for cell_id, source in sources.items():
        unbound = free_names(source) - available
        assert not unbound, (
            f"--sections {number}: cell {cell_id} reads {sorted(unbound)}, which no cell of its plan binds "
            "before it: add the name to SHARED_NAMES or the section to SECTION_DEPENDENCY in plumbing/cells.py"
        )


def test_a_new_recording_keeps_each_cells_values_and_the_figures_of_the_recorded_sections_only():
    namespace = {"ENVIRONMENT": {"gpu": "G", "driver": "1"}, "SECTIONS": {2: {"status": "ok", "headline": "h"}},
                 "FIGURES": [{"section": 2, "name": "a"}, {"section": 4, "name": "b"}]}  # fmt: skip
    run = {"source": "x = 1\n", "output": "", "variables": {"x": 1}, "role": "run"}
    done = {"runs": {SECTION_PLAN[2]["run"][0]: run}, "failed": {}}
    made = recordings.new_recording("what", {}, namespace, done, [2], "c", "t", lambda number: {})
    assert recordings.decode(made["figures"]) == [{"section": 2, "name": "a"}], "section 4 was not recorded"
    assert made["cells"][SECTION_PLAN[2]["run"][0]]["variables"] == {"x": 1}
    assert made["sections"]["2"]["status"] == "ok" and made["sections"]["2"]["headline"] == "h"
