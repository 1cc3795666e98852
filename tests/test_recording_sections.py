"""What a recording keeps of each section, and which cells the recorder runs for the sections it records."""

import builtins

import pytest
import recordings
from support import free_names, module_level_names

from plumbing.cells import SECTION_ONE_NAMES, SECTION_PLAN


def test_a_new_recording_keeps_its_sections_status_and_the_cells_and_figures_it_ran_not_those_it_read():
    prelude, read, gpu = SECTION_PLAN[2]["define"][0], SECTION_PLAN[3]["run"][0], SECTION_PLAN[8]["gpu_define"][0]
    runs = {cell: {"source": "x = 1\n", "output": "", "variables": {"x": 1}, "role": role}
            for cell, role in ((prelude, "prelude"), (read, "recorded run"), (gpu, "gpu_define"))}  # fmt: skip
    status = {2: {"status": "ok", "headline": "h2"}, 8: {"status": "ok", "headline": "h8"}}
    namespace = {
        "ENVIRONMENT": {"gpu": "G", "driver": "1"},
        "FIGURES": [{"section": 2}, {"section": 4}],
        "SECTIONS": status,
    }
    done = {"runs": runs, "failed": {8: gpu}}
    made = recordings.new_recording("what", {}, namespace, done, [2, 5, 8], "c", "t", lambda number: {"s": number})
    assert {cell: entry["section"] for cell, entry in made["cells"].items()} == {prelude: None, gpu: 8}, (
        "a prelude cell has no section; a section read from another recording keeps that one's cells"
    )
    assert made["cells"][gpu]["variables"] == {"x": 1} and recordings.decode(made["figures"]) == [{"section": 2}]
    sections = {n: (e["status"], e["headline"], e["failed_cell"], e["cost"]) for n, e in made["sections"].items()}
    assert sections == {"2": ("ok", "h2", None, {"s": 2}), "5": ("NOT RUN", "", None, {"s": 5}),
                        "8": ("FAILED", "h8", gpu, {"s": 8})}, "a cell that raised fails its section"  # fmt: skip
    assert gpu in made["sections"]["8"]["reason"], "the reason must name the cell that failed"


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

    def source_of(cell_id):  # the Python a recorder runs: without the %%needs_ncu line
        return recordings.without_cell_magic(recordings.cell_source(cells, cell_id))

    before = set().union(*(module_level_names(source_of(step[1])) for step in steps[:first]))
    sources = {cell_id: source_of(cell_id) for cell_id, _ in recordings.section_steps(cells, number)}
    available = before | set().union(*map(module_level_names, sources.values())) | set(SECTION_ONE_NAMES)
    available |= set(dir(builtins)) | {"display", "get_ipython"}  # what IPython gives every cell
    for cell_id, source in sources.items():
        unbound = free_names(source) - available
        assert not unbound, (
            f"--sections {number}: cell {cell_id} reads {sorted(unbound)}, which no cell of its plan binds "
            "before it: add the name to SHARED_NAMES or the section to SECTION_DEPENDENCY in plumbing/cells.py"
        )
