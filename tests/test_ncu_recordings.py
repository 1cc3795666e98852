"""The Nsight Compute sections' own analysis cells, run on real Nsight Compute data recorded on a GPU machine.

scripts/record_ncu.py ran the notebook's benchmark cells under the ncu command line (launch mode) and saved the
frames that nsight-python's own extraction and aggregation built. Here a real kernel runs the notebook's harness,
its define cells and its analysis cells (by id, never copied), with the recorded frames under the notebook's own
variable names, and each section's lesson is checked with bands set by physics (datasheet peaks, the L2 size,
tensor sizes), not by one run's digits. A recording sits in docs/verified/<gpu>-ncu-<version>/; every one found is
tested, so a T4 recording beside the H200 one gets the same checks.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re

import pytest
import record_ncu
import recordings
import render_recorded
from support import ROOT, RecordedNotebook, free_names, module_level_names

from plumbing.cells import SECTION_DEPENDENCY, SECTION_ONE_NAMES, SECTION_PLAN, section_of

FOLDERS = recordings.recording_folders("ncu")
RERECORD = "re-run scripts/record_ncu.py on a GPU machine, then scripts/render_recorded.py, and commit the folder"
EXPECTED_UNITS = {
    "gpu__time_duration.sum": "ns",
    "dram__cycles_elapsed.avg.per_second": "hz",
    "lts__t_sector_hit_rate.pct": "%",
    "gpc__cycles_elapsed.avg.per_second": "hz",
    "dram__bytes_read.sum": "byte",
    "dram__bytes_write.sum": "byte",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "%",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "%",
}


def test_a_recording_is_committed():
    assert FOLDERS, f"no docs/verified/*/recording.json: the Nsight Compute sections are untested; {RERECORD}"


@pytest.fixture(scope="module", params=FOLDERS, ids=[folder.name for folder in FOLDERS])
def recorded(request, notebook, tmp_path_factory):
    runner = RecordedNotebook(notebook, request.param, tmp_path_factory.mktemp(request.param.name))
    yield runner
    runner.close()


def test_every_recorded_sections_analysis_runs_on_the_nsight_compute_values(recorded):
    numbers = recordings.recorded_sections(recorded.recording)
    for number in numbers:
        recorded.section(number)  # fails, naming the section's cells, unless the section ends ok
    suspect = recorded.value("[f for f in FIGURES if f['check'] == 'SUSPECT']")
    assert not suspect, f"figures outside the recorded GPU's physical limits: {suspect}"


# ---------------------------------------------------------------- the recording and the notebook agree
def _plain(value):
    """Tuples as lists, as JSON gives them back from the kernel."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def test_recording_was_made_from_the_notebooks_current_benchmark_settings(recorded):
    numbers = recordings.recorded_sections(recorded.recording)
    for number in numbers:
        recorded.section(number)  # runs the define cells
    settings = recordings.benchmark_setting_names(recordings.load_cells(), numbers)
    recorded_values = recorded.recording["define_values"].items()
    then = {name: _plain(recordings.decode(value)) for name, value in recorded_values if name in settings}
    now = recorded.value(f"{{name: globals().get(name) for name in {sorted(then)!r}}}")
    stale = {
        name: f"recorded {str(then[name])[:80]!r}, now {str(now[name])[:80]!r}"
        for name in then
        if then[name] != now[name]
    }
    assert not stale, (
        f"the notebook's define cells changed since the recording {recorded.folder.name}: {stale}; {RERECORD}"
    )


def test_the_recorded_page_has_every_name_section_1_leaves_for_later_sections(recorded):
    present = recorded.value(f"[name for name in {list(SECTION_ONE_NAMES)!r} if name in globals()]")
    missing = set(SECTION_ONE_NAMES) - set(present)
    assert missing == {"torch"}, f"recordings.cpu_section_one_source does not make {sorted(missing - {'torch'})}"


def test_every_metric_the_notebook_requests_exists_for_a_t4():
    listings = sorted((ROOT / "docs" / "verified").glob("*/tu104_metric_suffixes.txt"))
    assert listings, "no committed tu104 metric list (scripts/record_ncu.py writes tu104_metric_suffixes.txt)"
    listing = listings[-1]
    known = {line.split()[0] for line in listing.read_text().splitlines() if re.match(r"^[a-z0-9]+__", line)}
    requested = record_ncu.notebook_metrics(recordings.load_cells())
    unknown = [metric for metric in requested if metric not in known]
    assert not unknown, (
        f"metrics the notebook requests are not in `ncu --query-metrics-mode suffix --chip tu104` ({listing.name}): "
        f"{unknown}. Misspelt? Fix the name in the notebook; a new base metric needs that list re-made "
        "(scripts/record_ncu.py writes it)."
    )


def test_recorded_units_are_the_ones_nsight_reports(recorded):
    variables = recorded.recording["variables"]
    frames = [*variables["condition_frames"].values(), variables["bound_frame"], variables["fusion_frame"]]
    frames.append(variables["sweep_frame"])
    units = {(metric, unit) for frame in frames for metric, unit in zip(frame.Metric, frame.Unit, strict=True)}
    wrong = {(metric, unit) for metric, unit in units if EXPECTED_UNITS.get(metric, unit) != unit}
    assert not wrong, f"units in the recorded frames differ from Nsight Compute's base units: {wrong}"
    clocks = {clock for frame in frames for clock in frame.ComputeClock}
    assert len(clocks) == 1, f"ComputeClock is a rated device attribute and must not vary: {clocks}"


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_rendered_page_says_how_the_data_was_recorded_and_every_section_was_ok(folder):
    recording = recordings.load_recording(folder)
    page = folder / "recorded_sections.html"
    assert page.exists(), f"no rendered page in {folder.name}: run python scripts/render_recorded.py"
    text = page.read_text()
    for fact in (recording["provenance"]["gpu"], recording["provenance"]["ncu_version"], "launch mode", "not attach"):
        assert fact in text, f"the rendered page must say {fact!r}; re-render with python scripts/render_recorded.py"
    figures = json.loads((folder / "figures.json").read_text())
    assert sorted(map(int, figures["sections"])) == recordings.recorded_sections(recording), (
        "the page shows other sections than the recording holds: re-render with python scripts/render_recorded.py"
    )
    assert all(info["status"] == "ok" for info in figures["sections"].values()), figures["sections"]
    assert figures["figures"] and all(figure["check"] == "ok" for figure in figures["figures"]), figures["figures"]
    assert figures["recording_created_utc"] == recording["created_utc"], "the page was rendered from another recording"


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_every_recorded_output_sits_beside_the_source_that_printed_it(folder):
    """The page shows each run cell with the recording's source (the one that printed its output, whatever the
    notebook holds now), and that source is the one the recorder hashed when it ran it."""
    notebook, recording = render_recorded.build(folder)
    shown = {cell.metadata["recorded_cell"]: cell for cell in notebook.cells if "recorded_cell" in cell.metadata}
    assert shown, "the page shows no recorded cell"
    for cell_id, cell in shown.items():
        entry = recording["cells"][cell_id]
        assert cell.source == entry["source"], (
            f"{cell_id}: the page shows a source other than the one that printed its recorded output; "
            "render_recorded.recorded_cell must show the recording's source"
        )
        ran = recording["provenance"].get("cell_sha256", {}).get(cell_id, entry["sha256"])
        assert hashlib.sha256(cell.source.encode()).hexdigest() == ran, (
            f"{cell_id}: the recording's source is not the one its recorder hashed when the cell ran; {RERECORD}"
        )
        output = "".join(output.get("text", "") for output in cell.outputs)
        assert output == entry["output"], f"{cell_id}: the page's output is not the recorded one"


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_a_run_cell_changed_since_the_recording_is_named_on_the_page(folder):
    notebook, recording = render_recorded.build(folder)
    now = {cell["id"]: cell["source"] for cell in recordings.load_cells()}
    changed = sorted(
        cell_id for cell_id, entry in recording["cells"].items()
        if entry["role"] == "run" and cell_id in now and entry["source"] != now[cell_id]
    )  # fmt: skip
    notes = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    named = sorted(set(re.findall(r"The notebook's cell `([a-z0-9-]+)` has changed since this recording", notes)))
    assert named == changed, f"cells changed since the recording: {changed}; the page names {named}"


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_recorded_notes_quote_ncu_wall_time_only_where_the_recording_timed_profiled_calls(folder):
    notebook, recording = render_recorded.build(folder)
    notes = [cell.source for cell in notebook.cells if cell.cell_type == "markdown" and "*Recorded:*" in cell.source]
    quoted = sorted(float(seconds) for note in notes for seconds in re.findall(r"([\d.]+) s of ncu wall time", note))
    timed = sorted(
        round(info["cost"]["ncu_wall_s"], 1)
        for info in recording["sections"].values()
        if info["cost"].get("profiled_calls") and info["cost"].get("ncu_wall_s") is not None
    )
    assert quoted == timed, (
        f"the notes quote {quoted} s of ncu wall time, the recording timed {timed} s: a section without profiled "
        "calls in the recording (section 10 runs ncu itself and prints its own time) must not get a wall-time figure"
    )


def test_a_run_cells_injection_binds_exactly_what_that_cell_bound_on_the_gpu_machine():
    """Not every recorded value at once: a later cell's values (or another section's, under the same name) must not
    be there before that cell."""
    recording = recordings.load_recording(FOLDERS[0])
    for cell_id, entry in recording["cells"].items():
        if entry["role"] != "run":
            continue
        namespace = {"RECORDING": recording}
        exec(recordings.inject_source(cell_id), namespace)
        bound = set(namespace) - {"RECORDING", "__builtins__"}
        assert bound == set(entry["variables"]), f"{cell_id}: the injection bound {sorted(bound)}"


def test_a_section_without_profiled_calls_gets_no_ncu_wall_time_note():
    cost = {"profiled_calls": 0, "ncu_processes": 1, "ncu_wall_s": 0.0, "wall_s": 7.0}
    assert render_recorded.wall_note({"sections": {"10": {"cost": cost}}}, 10) == "", (
        "section 10 runs ncu itself and prints its own time: the recorder timed no profiled call there"
    )


# ---------------------------------------------------------------- the plan: what a section reads from another
def test_every_name_a_section_reads_from_another_section_is_in_section_dependency():
    """A section recorded alone gets section 1's names, the prelude (harness and shared define cells) and the
    sections SECTION_DEPENDENCY names; a name from any other section is a NameError on the runner (section 8's
    first recording stopped at s8-reasons on section 3's `means`)."""
    cells = recordings.load_cells()
    code = {number: [cell for cell in cells if cell["type"] == "code" and section_of(cell["id"]) == number]
            for number in SECTION_PLAN}  # fmt: skip
    binds = {number: set().union(*(module_level_names(cell["source"]) for cell in cs)) for number, cs in code.items()}
    prelude = set().union(*(module_level_names(recordings.cell_source(cells, cell_id))
                            for cell_id in recordings.prelude_cell_ids(cells)))  # fmt: skip
    given = set(dir(builtins)) | {"display", "get_ipython"} | set(SECTION_ONE_NAMES) | prelude  # IPython's own too
    for number, section_cells in code.items():
        available = given | binds[number] | set().union(*(binds[other] for other in SECTION_DEPENDENCY.get(number, ())))
        for cell in section_cells:
            borrowed = {
                name: sorted(other for other in binds if name in binds[other])
                for name in free_names(cell["source"]) - available
            }
            assert not borrowed, (
                f"cell {cell['id']} of section {number} reads {borrowed} (name: the sections that bind it), which a "
                f"recording of section {number} alone does not have: add the section to plumbing/cells.py's "
                "SECTION_DEPENDENCY (or the name to SHARED_NAMES, if a define cell binds it)"
            )
