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
    frames = [*variables["doubling_frames"].values(), variables["limits_frame"], variables["fusion_frame"]]
    frames.append(variables["ncu_matmul_frame"])
    units = {(metric, unit) for frame in frames for metric, unit in zip(frame.Metric, frame.Unit, strict=True)}
    wrong = {(metric, unit) for metric, unit in units if EXPECTED_UNITS.get(metric, unit) != unit}
    assert not wrong, f"units in the recorded frames differ from Nsight Compute's base units: {wrong}"
    clocks = {clock for frame in frames for clock in frame.ComputeClock}
    assert len(clocks) == 1, f"ComputeClock is a rated device attribute and must not vary: {clocks}"


# ---------------------------------------------------------------- section 4: cache and clock control
def _clock_rows(recorded):
    recorded.section(4)
    rows = recorded.value("clock_table.to_dict('records')")
    small, large = sorted({row["input (MiB)"] for row in rows})
    table = {(row["cache"], row["clock"], row["input (MiB)"]): row for row in rows}
    return table, small, large


def test_s4_inputs_are_a_quarter_and_sixteen_times_the_l2(recorded):
    _, small, large = _clock_rows(recorded)
    l2_mib = recorded.recording["environment"]["l2_bytes"] / 2**20
    assert small == pytest.approx(l2_mib / 4, rel=1e-6) and large == pytest.approx(16 * l2_mib, rel=1e-6), (
        f"s4-table's 'input (MiB)' ({small}, {large}) is not L2/4 and 16 x L2 ({l2_mib} MiB): check its bytes per "
        "float32 element (4) and the MiB conversion"
    )


def test_s4_l2_hit_rate_is_each_reports_own_and_the_cache_setting_barely_moves_the_large_input(recorded):
    table, small, large = _clock_rows(recorded)
    for (cache, clock), frame in recorded.recording["variables"]["doubling_frames"].items():
        rates = frame[frame.Metric == "lts__t_sector_hit_rate.pct"]
        for n, rate, unit in zip(rates.n, rates.AvgValue, rates.Unit, strict=True):
            shown = table[(cache, clock, 4 * n / 2**20)]["L2 hit %"]
            assert unit == "%" and 0 <= rate <= 100 and shown == pytest.approx(rate), (
                f"{cache}/{clock}, n={n}: s4-table shows L2 hit % {shown}, the report {rate} {unit}: check the "
                "column's metric and that pivot_in_base_units leaves percentages alone"
            )
    measured = [key for key, row in table.items() if row["L2 hit %"] == row["L2 hit %"]]  # NaN: not requested
    assert {(cache, size) for cache, _, size in measured} == {(c, s) for c in ("all", "none") for s in (small, large)}
    cold, warm = table[("all", "none", large)]["time (us)"], table[("none", "none", large)]["time (us)"]
    assert abs(warm / cold - 1) < 0.05, f"large input (16 x L2): cache setting should not matter: {cold} vs {warm} us"


def test_s4_base_clock_lowers_the_measured_clock_and_never_the_computeclock_column(recorded):
    table, _, _ = _clock_rows(recorded)
    rated = {row["ComputeClock (MHz)"] for row in table.values()}
    assert len(rated) == 1, f"ComputeClock (MHz) must be one rated value in every row: {rated}"
    rated_mhz = rated.pop()
    assert 300 < rated_mhz < 3000, f"ComputeClock (MHz) = {rated_mhz}: the column is kHz, so divide by 1e3"
    for (cache, clock, size), row in table.items():
        measured = row["SM clock (MHz)"]
        assert 0.2 * rated_mhz < measured <= 1.02 * rated_mhz, (
            f"SM clock (MHz) {measured} for {cache}/{clock}/{size} MB is outside (0.2, 1.02] x the rated "
            f"{rated_mhz} MHz: check the hz -> MHz conversion in s4-table"
        )
        if clock == "base":
            boost = table[(cache, "none", size)]["SM clock (MHz)"]
            assert measured < 0.9 * boost, f"clock='base' ({measured} MHz) should be below boost ({boost} MHz)"


def test_s4_base_clock_moves_the_dram_bound_large_inputs_time_far_less_than_its_sm_clock(recorded):
    table, _, large = _clock_rows(recorded)
    for cache in ("all", "none"):
        base, boost = table[(cache, "base", large)], table[(cache, "none", large)]
        clock_moved = base["SM clock (MHz)"] / boost["SM clock (MHz)"] - 1
        time_moved = base["time (us)"] / boost["time (us)"] - 1
        assert clock_moved < -0.1 and abs(time_moved) < 0.02, (
            f"cache={cache}: at base clock the large input's SM clock moved {clock_moved:+.1%} and its time "
            f"{time_moved:+.1%}; s4-read says a time that moves much less than its clock is not limited by it: "
            "check s4-table's time and clock columns and the (cache, clock) keys of doubling_frames"
        )


def test_s4_large_input_streams_at_a_physical_share_of_dram_bandwidth(recorded):
    table, _, large = _clock_rows(recorded)
    row = table[("all", "none", large)]
    from_time = 2 * large * 2**20 / (row["time (us)"] * 1e3)  # read x, write 2x: bytes per ns = GB/s
    peak = recorded.peaks()["dram_gbs"]
    assert 0.5 * peak < from_time <= peak, (
        f"x * 2.0 on {large:,.0f} MiB in {row['time (us)']:,.1f} us is {from_time:,.0f} GB/s, outside 50-100% of the "
        f"{peak:,.0f} GB/s DRAM peak: a unit slip in s4-table's time column or in s4-units' TO_BASE_UNITS"
    )
    assert row["GB/s"] == pytest.approx(from_time, rel=1e-3), (
        f"s4-table's GB/s {row['GB/s']:,.0f} differs from bytes over time {from_time:,.0f}: check its bytes (2 x 4 n)"
    )
    assert recorded.figure(4)["check"] == "ok", f"s4-record judged its figure {recorded.figure(4)}"


# ---------------------------------------------------------------- section 6: compute- or memory-bound
def _limits(recorded):
    recorded.section(6)
    table = recorded.value("limits_table.join(counters).to_dict('index')")  # the verdicts, and what the counters saw
    kernels = recorded.value("limits_frame.groupby('Annotation', sort=False).Kernel.first().to_dict()")
    by_kind = {}
    for annotation, kernel in kernels.items():  # which region is which, by the kernel that ran in it
        kind = "matmul" if re.search("gemm|xmma|sm90|cutlass", kernel) else "softmax" if "softmax" in kernel else None
        kind = kind or ("scale" if "elementwise" in kernel else annotation)
        by_kind[kind] = table[annotation]
    assert set(by_kind) == {"matmul", "scale", "softmax"}, f"unexpected kernels in section 6: {kernels}"
    return by_kind


def test_s6_matmul_is_compute_bound_scale_and_softmax_memory_bound(recorded):
    rows = _limits(recorded)
    matmul, scale, softmax = rows["matmul"], rows["scale"], rows["softmax"]
    assert matmul["SM %"] > 70 and matmul["DRAM %"] < 30, f"fp16 matmul should be compute-bound: {matmul}"
    assert scale["DRAM %"] > 70 and scale["SM %"] < 20, f"x * 2.0 should be memory-bound: {scale}"
    verdicts = (matmul["bottleneck"], scale["bottleneck"], softmax["bottleneck"])
    assert verdicts == ("compute", "memory", "memory"), (
        f"s6-table's verdicts {verdicts} should be compute / memory / memory (the softmax judged by the bytes it must "
        "move, not by the DRAM bytes a flushed window counted): check KERNEL_BYTES and limit()"
    )


def test_s6_bandwidth_from_bytes_and_time_agrees_with_the_dram_counter(recorded):
    rows = _limits(recorded)
    scale_gbs, peak = recorded.value("scale_gbs"), recorded.peaks()["dram_gbs"]
    from_counter = rows["scale"]["DRAM %"] / 100 * peak
    assert 0.85 < scale_gbs / from_counter < 1.2, (
        f"s6-check's bandwidth {scale_gbs:,.0f} GB/s disagrees with Nsight Compute's DRAM % ({from_counter:,.0f} "
        "GB/s): check the bytes it counts (read and write: 2 x 4 bytes per element) and the time unit"
    )
    assert 0.5 * peak < scale_gbs <= peak, f"{scale_gbs:,.0f} GB/s is not 50-100% of the {peak:,.0f} GB/s peak"
    assert recorded.figure(6)["check"] == "ok", f"s6-record judged its figure {recorded.figure(6)}"


# ---------------------------------------------------------------- section 7: fusion in bytes
def test_s7_without_a_combiner_nsight_refuses_a_region_with_two_kernels(recorded):
    text = recorded.recording["variables"]["several_kernels_error"]
    assert "More than one (total=2) kernel" in text and "combine_kernel_metrics" in text, text
    errors = [call["error"] for call in recorded.recording["calls"] if call.get("error")]
    assert [error["type"] for error in errors] == ["RuntimeError"], f"only s7-error's call may fail: {errors}"


def _fusion(recorded):
    recorded.section(7)
    two, one = recorded.value("fusion_table.to_dict('records')")
    tensor_mb = 4 * recorded.value("FUSION_ELEMENTS") / 1e6
    return two, one, tensor_mb


def test_s7_dram_bytes_match_the_tensors_each_version_must_move(recorded):
    two, one, tensor_mb = _fusion(recorded)
    l2_mb = recorded.recording["environment"]["l2_bytes"] / 1e6
    for name, row, reads, writes in (("multiply, then add", two, 4, 2), ("addcmul", one, 3, 1)):
        assert row["read (MB)"] == pytest.approx(reads * tensor_mb, rel=0.1), (
            f"{name}: {row['read (MB)']:.1f} MB read, but it must read {reads} tensors of {tensor_mb:.1f} MB: "
            "check the MB conversion in s7-table (or a swapped read/written column)"
        )
        assert row["must read (MB)"] == pytest.approx(row["read (MB)"], rel=0.1), (
            f"{name}: s7-table says it must read {row['must read (MB)']:.1f} MB but {row['read (MB)']:.1f} MB were "
            "counted: is its tensor count right?"
        )
        # Writes still in L2 when the kernel ends are not counted: at most one L2's worth goes missing.
        must = row["must write (MB)"]
        assert must - 1.1 * l2_mb <= row["written (MB)"] <= 1.02 * must, (
            f"{name}: {row['written (MB)']:.1f} MB written against {must:.1f} MB it must write (L2 {l2_mb:.0f} MB): "
            f"it writes {writes} tensor(s); check s7-table's tensor count and its MB conversion"
        )


def test_s7_fused_kernel_is_faster_in_step_with_the_bytes_it_saves(recorded):
    two, one, _ = _fusion(recorded)
    speedup = two["time (us)"] / one["time (us)"]
    traffic = (two["read (MB)"] + two["written (MB)"]) / (one["read (MB)"] + one["written (MB)"])
    assert 1.2 < speedup < 2.0 and 1.2 < traffic < 1.7, f"fusion: {speedup:.2f}x faster, {traffic:.2f}x fewer bytes"
    assert abs(speedup / traffic - 1) < 0.15, "both versions are memory-bound: time should follow the bytes"
    gbs = (one["read (MB)"] + one["written (MB)"]) * 1e6 / (one["time (us)"] * 1e3)
    peak = recorded.peaks()["dram_gbs"]
    assert 0.5 * peak < gbs <= peak, f"addcmul: {gbs:,.0f} GB/s against a {peak:,.0f} GB/s peak: time unit?"
    assert recorded.figure(7)["check"] == "ok", f"s7-record judged its figure {recorded.figure(7)}"


# ---------------------------------------------------------------- section 9: CUPTI against Nsight Compute
def test_s9_both_tools_agree_on_the_long_products_and_time_them_physically(recorded):
    recorded.section(9)
    rows = recorded.value("comparison.reset_index().to_dict('records')")
    largest = max(rows, key=lambda row: row["n"])
    assert 0.9 < largest["CUPTI / ncu"] < 1.1, f"n={largest['n']}: CUPTI and ncu should agree: {largest}"
    assert all(0.5 < row["CUPTI / ncu"] < 1.2 for row in rows), f"CUPTI / ncu out of band: {rows}"
    tflops = 2 * largest["n"] ** 3 / (largest["ncu (us)"] * 1e-6) / 1e12
    peak = recorded.peaks()["fp32_tflops"]
    assert 0.3 * peak < tflops <= peak, (
        f"fp32 {largest['n']} product from the 'ncu (us)' column: {tflops:.1f} TFLOP/s against a {peak} peak: "
        "check s9-compare's ns -> us conversion"
    )
    assert recorded.value("ncu_elapsed_s") > recorded.value("cupti_result['wall_s']"), "CUPTI should cost less time"
    assert recorded.value("SECTIONS[9]['headline']"), "s9-record set no headline"


# ---------------------------------------------------------------- section 10: keep the evidence
def test_s10_opens_the_recorded_fusion_report_with_ncu_report(recorded):
    recorded.section(10)
    frame = recorded.recording["variables"]["fusion_frame"]
    runs = int(frame.NumRuns.iloc[0])
    kernels = sum(kernel.count("|") + 1 for kernel in frame.groupby("Annotation").Kernel.first())
    launches = recorded.value("launches.to_dict('records')")
    assert len(launches) == runs * kernels, f"the report should hold {runs} runs x {kernels} kernels: {launches}"
    times = [launch["time (ns)"] for launch in launches]
    assert recorded.value("report.range_by_idx(0).action_by_idx(0)['gpu__time_duration.sum'].unit()") == "ns"
    assert sum(times) / runs == pytest.approx(frame[frame.Metric == "gpu__time_duration.sum"].AvgValue.sum()), (
        "the report's kernel times should add up to section 7's frame (time per run)"
    )
    assert min(launch["metrics stored"] for launch in launches) > 3, "a report stores more metrics than requested"
    files = recorded.value("sorted(path.name for path in evidence_dir.iterdir())")
    assert any(name.endswith(".ncu-rep") for name in files) and any(name.endswith(".log") for name in files), files


# ---------------------------------------------------------------- the rendered page
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
