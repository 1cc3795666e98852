"""Issue 12: each lesson that sections 4, 7, 8 and 9 now state is held by the data a real run recorded.

The Nsight Compute half comes from docs/verified/<gpu>-ncu-<version>/recording.json (scripts/record_ncu.py on the
GPU runner); the notebook's own analysis cells run on it in a real kernel, as in tests/test_ncu_recordings.py.
Section 8 ran under CUPTI in the headless run (docs/verified/<gpu>-cupti/summary.json). The bands come from
physics and from nsight's own rules, not from one run's digits. A recording made before these cells existed
fails with a message that says so: it must be re-made, never skipped.
"""

from __future__ import annotations

import json
import re

import pytest
import record_ncu
import recordings
from support import ROOT, RecordedNotebook

from plumbing.cells import SECTION_DEPENDENCY

FOLDERS = recordings.recording_folders("ncu")
CUPTI_RUNS = sorted(path.parent for path in (ROOT / "docs" / "verified").glob("*-cupti/summary.json"))
RERECORD = (
    "re-record on the GPU runner (python3 scripts/record_ncu.py, then python scripts/render_recorded.py) and commit "
    "the folder"
)
RERECORD_CUPTI = "re-record on the GPU runner (python3 scripts/record_cupti.py) and commit the folder"
MEMORY_CLOCK = "dram__cycles_elapsed.avg.per_second"


def predates(folder, what: str):
    pytest.fail(f"{folder.name}: the recording predates issue 12's cells ({what}); {RERECORD}")


def require_current(folder, recording: dict) -> None:
    """Fail, saying why, unless the recording holds what the new cells need."""
    variables = recording["variables"]
    missing = [name for name in ("ncu_matmul_frame", "doubling_frames") if name not in variables]
    if missing:
        predates(folder, f"it holds no {missing}")
    if "run_started_s_Min" not in variables["ncu_matmul_frame"].columns:
        predates(folder, "section 9's Nsight Compute frame has no run_started_s timestamps")
    for (cache, clock), frame in variables["doubling_frames"].items():
        if clock == "none" and MEMORY_CLOCK not in set(frame.Metric):
            predates(folder, f"section 4's cache={cache} clock=none frame has no {MEMORY_CLOCK}")


class Lessons:
    """The recording of one folder; its notebook kernel starts on first use."""

    def __init__(self, notebook, folder, tmp_path):
        self.notebook, self.folder, self.tmp_path = notebook, folder, tmp_path
        self.recording = recordings.load_recording(folder)
        self._runner = None

    def runner(self) -> RecordedNotebook:
        require_current(self.folder, self.recording)
        if self._runner is None:
            self._runner = RecordedNotebook(self.notebook, self.folder, self.tmp_path)
        return self._runner

    def close(self):
        if self._runner is not None:
            self._runner.session.close()


@pytest.fixture(scope="module", params=FOLDERS, ids=[folder.name for folder in FOLDERS])
def lessons(request, notebook, tmp_path_factory):
    found = Lessons(notebook, request.param, tmp_path_factory.mktemp(f"lessons-{request.param.name}"))
    yield found
    found.close()


# ---------------------------------------------------------------- the recorder leaves the runner's clocks alone
def test_the_metrics_the_notebook_requests_are_in_the_committed_tu104_listing():
    listings = sorted((ROOT / "docs" / "verified").glob("*/tu104_metrics.txt"))
    assert listings, "no committed tu104_metrics.txt (scripts/record_ncu.py writes `ncu --query-metrics --chip tu104`)"
    known = {line.split()[0] for line in listings[-1].read_text().splitlines() if re.match(r"^[a-z0-9]+__", line)}
    bases = {metric.split(".", 1)[0] for metric in record_ncu.notebook_metrics(recordings.load_cells())}
    assert MEMORY_CLOCK.split(".")[0] in bases, "section 4 should request the memory clock metric"
    assert bases <= known, f"not in the T4 (tu104) metric listing {listings[-1]}: {sorted(bases - known)}"


def test_every_ncu_run_of_the_recording_left_the_clocks_alone_and_base_rows_name_their_recording(lessons):
    for call in lessons.recording["calls"]:
        if call.get("served_from"):
            source = call["served_from"]
            assert call.get("clock_control") != "none" and "command" not in call, call
            assert source.get("label") and source.get("created_utc") and source.get("folder"), (
                f"call {call['index']} was served from a committed recording but does not say which: {source}"
            )
            continue
        command = call.get("command", "").split()
        if "--clock-control" not in command or command[command.index("--clock-control") + 1] != "none":
            predates(lessons.folder, f"call {call['index']} ran ncu with {call.get('clock_control')!r} clocks")


# ---------------------------------------------------------------- section 4: the memory clock
def test_s4_table_shows_the_memory_clock_the_recording_measured(lessons):
    runner = lessons.runner()
    runner.section(4)
    rows = runner.value("clock_table.to_dict('records')")
    frames = lessons.recording["variables"]["doubling_frames"]
    for row in rows:
        frame = frames[(row["cache"], row["clock"])]
        measured = frame[frame.Metric == MEMORY_CLOCK]
        if measured.empty:  # only rows served from an older recording may lack it, and they say where from
            assert row["clock"] != "none", f"cache={row['cache']} clock=none has no memory clock in the recording"
            continue
        assert set(measured.Unit) == {"hz"}, f"{MEMORY_CLOCK} unit {set(measured.Unit)}: expected hz"
        assert 500 < row["memory clock (MHz)"] < 10_000, (
            f"memory clock {row['memory clock (MHz)']} MHz for {row}: DRAM clocks lie between 0.5 and 10 GHz; "
            "check s4-table's Hz -> MHz conversion"
        )
    unlocked = [row["memory clock (MHz)"] for row in rows if row["clock"] == "none"]
    assert max(unlocked) / min(unlocked) < 1.02, f"one GPU, one memory clock with clocks unlocked: {unlocked} MHz"


# ---------------------------------------------------------------- section 7: written bytes without the flush
def test_s7_without_the_flush_bytes_written_match_what_must_be_written(lessons):
    runner = lessons.runner()
    runner.section(7)
    rows = runner.value("fusion_table.reset_index().to_dict('records')")
    l2_mb = lessons.recording["environment"]["l2_bytes"] / 1e6
    frame = lessons.recording["variables"]["unflushed_fusion_frame"]
    for row in rows:
        # With the flush every input comes from DRAM, once: a streaming kernel reads exactly what it must.
        assert row["read (MB)"] == pytest.approx(row["must read (MB)"], rel=0.02), (
            f"{row['Annotation']}: {row['read (MB)']:.1f} MB read against {row['must read (MB)']:.1f} MB it must read:"
            " check s7-table's read column (bytes / 1e6 = MB) and the must-read budget"
        )
        must = row["must write (MB)"]
        # Without a flush the window counts the kernel's own writes, less what it leaves dirty in L2 at its end, plus
        # earlier lines evicted during it: a few percent either way on the recording (H200: +2.2% and +3.9%).
        assert row["written, no flush (MB)"] == pytest.approx(must, rel=0.05), (
            f"{row['Annotation']}: {row['written, no flush (MB)']:.1f} MB written without the flush, against "
            f"{must:.1f} MB it must write: check s7-table's no-flush column (bytes / 1e6 = MB)"
        )
        counted = frame[(frame.Annotation == row["Annotation"]) & (frame.Metric == "dram__bytes_write.sum")]
        assert row["written, no flush (MB)"] == pytest.approx(counted.AvgValue.iloc[0] / 1e6, rel=1e-6), (
            "s7-table's no-flush column must be the recorded unflushed frame's dram__bytes_write.sum"
        )
        shortfall = must - row["written (MB)"]
        assert -0.02 * must <= shortfall <= 1.1 * l2_mb, (
            f"{row['Annotation']}: with the flush {row['written (MB)']:.1f} MB written of {must:.1f} MB: the "
            f"shortfall can only be what an L2 of {l2_mb:.0f} MB still held"
        )


def test_s7_l2_took_in_every_byte_the_kernels_must_write_even_where_dram_counted_fewer(lessons):
    frame = lessons.recording["variables"]["fusion_frame"]
    if "lts__t_sectors_op_write.sum" not in set(frame.Metric):
        predates(lessons.folder, "section 7's frame has no lts__t_sectors_op_write.sum (bytes written into L2)")
    runner = lessons.runner()
    runner.section(7)
    for row in runner.value("fusion_table.reset_index().to_dict('records')"):
        assert row["written to L2 (MB)"] >= 0.98 * row["must write (MB)"], (
            f"{row['Annotation']}: every store passes L2, yet L2 took in {row['written to L2 (MB)']:.1f} MB of the "
            f"{row['must write (MB)']:.1f} MB it must write: check s7-table (sectors x 32 bytes, s4-units)"
        )


# ---------------------------------------------------------------- section 9: the gap and the cost
def test_s9_flush_explains_part_but_not_all_of_the_smallest_products_gap(lessons):
    runner = lessons.runner()
    runner.section(9)
    gap = runner.value("gap")
    variables = lessons.recording["variables"]
    smallest = min(row["n"] for row in variables["cupti_result"]["rows"])
    ncu = variables["ncu_matmul_frame"]
    flushed = ncu[ncu.n == smallest].AvgValue.iloc[0] / 1e3
    kept = variables["unflushed_smallest_frame"].AvgValue.iloc[0] / 1e3
    cupti = next(row["AvgValue"] for row in variables["cupti_result"]["rows"] if row["n"] == smallest) / 1e3
    assert gap["Nsight Compute, caches flushed (us)"] == pytest.approx(flushed, rel=1e-3), gap
    assert gap["Nsight Compute, caches kept (us)"] == pytest.approx(kept, rel=1e-3), gap
    assert cupti < kept < flushed, (
        f"n={smallest}: a flush can only add time, and Nsight Compute without it still took longer than CUPTI "
        f"in this recording: CUPTI {cupti:.2f} us, kept {kept:.2f} us, flushed {flushed:.2f} us"
    )
    share = (flushed - kept) / (flushed - cupti)
    assert gap["share of the gap the flush explains (%)"] == pytest.approx(100 * share, abs=0.01), (
        f"s9-gap's share {gap['share of the gap the flush explains (%)']} should be (flushed - kept) / (flushed - "
        f"CUPTI) = {100 * share:.1f}%"
    )
    assert 10 < 100 * share < 100 and gap["left unexplained (us)"] > 0, gap
    headline = runner.value("SECTIONS[9]['headline']")
    assert f"{share:.0%} of it at n={smallest} from the flush" in headline, headline


def test_s9_headline_compares_time_in_nsights_session_not_wall_time(lessons):
    runner = lessons.runner()
    runner.section(9)
    cost = runner.value("cost")
    frame = lessons.recording["variables"]["ncu_matmul_frame"]
    session = ((frame.run_started_s_Max - frame.run_started_s_Min) * frame.NumRuns / (frame.NumRuns - 1)).sum()
    kernels = (frame.AvgValue * frame.NumRuns).sum() / 1e9  # seconds of measured kernels
    wall = lessons.recording["variables"]["ncu_elapsed_s"]
    cupti = lessons.recording["variables"]["cupti_result"]["wall_s"]
    assert cost["Nsight Compute, inside nsight's session (s)"] == pytest.approx(session, rel=1e-3), cost
    assert kernels < session < wall, (
        f"nsight's session ({session:.2f} s) must be longer than the kernels it measured ({kernels:.4f} s) and "
        f"shorter than the wall time around the calls ({wall:.1f} s)"
    )
    headline = runner.value("SECTIONS[9]['headline']")
    assert f"CUPTI cost {session / cupti:.0f}x less time" in headline, (
        f"s9-record's headline should divide nsight's session time by CUPTI's ({session / cupti:.0f}x), not the "
        f"wall time ({wall / cupti:.0f}x): {headline}"
    )


# ---------------------------------------------------------------- section 8: which limit acted (CUPTI run)
S8_HEADLINE = re.compile(
    r"under load the SM clock ran (?P<low>\d+)-(?P<high>\d+) MHz \((?:rated|max boost) (?P<boost>\d+)\), held by "
    r"(?P<held>[^,]+(?:, [^,]+)*?), with a T\.Limit margin of at least (?P<margin>-?\d+|nan) C; (?P<modes>.*?); spread"
)
S8_MODE = re.compile(
    r"(?P<mode>\w+)(?: \(wait at (?P<wait>-?\d+) C, resume at (?P<cont>-?\d+) C\))? paused (?P<n>\d+) times"
)


@pytest.mark.parametrize("run", CUPTI_RUNS, ids=[run.name for run in CUPTI_RUNS])
def test_s8_clock_stays_under_the_maximum_boost_and_manual_pauses_at_the_margin_just_measured(run):
    summary = json.loads((run / "summary.json").read_text())
    section = next(section for section in summary["sections"] if section["number"] == 8)
    assert section["status"] == "ok", f"section 8 did not run cleanly in {run.name}: {section}"
    match = S8_HEADLINE.search(section.get("headline") or "")
    if match is None:
        pytest.fail(
            f"{run.name}: the headless run predates issue 12's section 8 (headline {section.get('headline')!r}); "
            "run scripts/run_headless on the GPU runner and commit the run folder"
        )
    low, high, boost = (int(match.group(key)) for key in ("low", "high", "boost"))
    assert low <= high <= 1.02 * boost, f"SM clocks above the maximum boost {boost} MHz: a unit slip? {match.group(0)}"
    modes = list(S8_MODE.finditer(match.group("modes")))
    assert modes, f"the headline names no thermal mode and its pauses: {match.group('modes')!r}"
    for mode in modes:
        if mode.group("wait") is not None:  # manual: thresholds from the lowest margin the "off" runs reached
            margin = int(match.group("margin"))
            wait, cont = int(mode.group("wait")), int(mode.group("cont"))
            assert wait == margin + 1 and wait < cont <= wait + 2, (
                "s8-run sets thermal_wait to the off runs' lowest margin + 1 and thermal_cont at most two above "
                f"(never above the off runs' highest margin, so that a pause can end): {mode[0]}"
            )
    if "H200" in summary["environment"]["gpu"]:  # every run recorded on the H200 so far, whatever its margin
        assert low < 0.9 * boost and "power cap" in match.group("held"), (
            f"on the H200, sustained fp16 load should pull the SM clock under its power cap: {match.group(0)}"
        )


# ---------------------------------------------------------------- section 3: what CUDA events include (CUPTI recording)
CUPTI_RECORDINGS = recordings.recording_folders("cupti")


@pytest.mark.parametrize("folder", CUPTI_RECORDINGS, ids=[folder.name for folder in CUPTI_RECORDINGS])
def test_s3_events_exceed_nsight_and_each_ratio_comes_with_its_lowest_and_highest_repeat(folder):
    timing = recordings.load_recording(folder)["cells"]["s3-timing-table"]
    means, table = timing["variables"]["means"], timing["variables"]["timing_table"]
    extra, queueing = means["CUDA events"] - means["nsight-python"], means["host clock, no synchronize"]
    assert extra > 0, f"the events' interval holds the kernel, so it cannot be shorter than nsight's time: {means}"
    if "lowest x nsight" not in table.columns:
        pytest.fail(f"{folder.name} predates s3-timing-table's spread columns; {RERECORD_CUPTI}")
    for method, row in table.drop(index="nsight-python").iterrows():
        assert row["lowest x nsight"] <= row["x nsight"] <= row["highest x nsight"], (
            f"{method}: the mean's ratio {row['x nsight']:.2f} must lie between its lowest and highest repeat "
            f"({row['lowest x nsight']:.2f}, {row['highest x nsight']:.2f}): check s3-timing-table's min and max"
        )
    printed = timing["output"]
    line = f"CUDA events minus nsight: {extra:.1f} us; the host queues the product in {queueing:.1f} us"
    assert line in printed, f"s3-timing-table should print {line!r} (the launch the events include): {printed!r}"


# ---------------------------------------------------------------- section 8 on both recordings: the manual pauses
ALL_RECORDINGS = recordings.recording_folders("ncu") + recordings.recording_folders("cupti")
POLL_S = 0.5  # nsight's thermal wait sleeps in steps of half a second (nsight/thermovision.py)


@pytest.mark.parametrize("folder", ALL_RECORDINGS, ids=[folder.name for folder in ALL_RECORDINGS])
def test_s8_manual_waits_only_after_its_margin_reached_thermal_wait_and_the_load_line_is_section_3s(
    notebook, folder, tmp_path
):
    recording = recordings.load_recording(folder)
    thermal = recording["cells"]["s8-run"]["variables"]["thermal"]
    off, manual = thermal["off"]["runs"], thermal["manual"]["runs"]
    thresholds = thermal["manual"]["thresholds"]
    assert thresholds, f"{folder.name}: manual ran with nsight's defaults, so nothing here shows a pause"
    wait, cont = thresholds["thermal_wait"], thresholds["thermal_cont"]
    assert wait == int(off.margin_c.min()) + 1 and wait < cont <= off.margin_c.max(), (
        f"thresholds {thresholds}: thermal_wait must be the off runs' lowest margin ({off.margin_c.min()}) + 1 and "
        f"thermal_cont above it but reachable (at most their highest margin, {off.margin_c.max()}): check s8-run"
    )
    late = {}
    for mode, runs in (("off", off), ("manual", manual)):  # a run nsight held back starts a poll step or more late
        gaps = runs.run_started_s.diff()
        late[mode] = set(gaps.index[gaps - gaps.median() >= 0.9 * POLL_S])
    for run in sorted(late["manual"] - late["off"]):  # late in manual only: the thermal check saw its margin
        before = manual.margin_c.loc[run - 1]
        assert before <= wait, (
            f"{folder.name}: manual run {run} started late after a margin of {before} C, above thermal_wait {wait}"
        )
    runner = RecordedNotebook(notebook, folder, tmp_path)
    try:
        for earlier in SECTION_DEPENDENCY[8]:  # what section 8 reads from them (section 3's unloaded time)
            runner.section(earlier)
        printed = runner.section(8)
        counted = runner.value("{mode: int(paused_before(r['runs']).sum()) for mode, r in thermal.items()}")
    finally:
        runner.session.close()
    assert counted == {mode: len(runs) for mode, runs in late.items()}, (
        f"the table's pauses {counted} are not the runs that started a poll step late {late}: check paused_before"
    )
    unloaded = recording["cells"]["s3-timing-run"]["variables"]["nsight_row"]["AvgValue"] / 1e3
    loaded = off.Value.mean() / 1e3
    line = f"the same product without the load (section 3): {unloaded:.1f} us; here, after the load: {loaded:.1f} us"
    assert line in printed, f"s8-reasons should put section 3's unloaded time beside the off run's mean: {line!r}"
