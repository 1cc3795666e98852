"""scripts/record_ncu.py on CPU: its plan, and the clock policy: every ncu it starts gets --clock-control none; a
clock_control='base' call is never run but served from the committed recording that ran it (section 4's own
benchmark, through nsight's real collect), or refused with the reason when no committed recording holds it. The ncu
command and the patches it runs nsight through are in test_ncu_launch.py, the recording library in
test_recordings.py.

What needs a GPU (the inner replay under ncu, the report itself) is exercised by the lead on the GPU runner; the
committed recording's analysis is tested in test_ncu_recordings.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import ncu_launch
import nsight
import pytest
import record_ncu
import recordings
from nsight.collection import ncu as nsight_ncu
from support import ROOT, RUN, ncu_namespace

from plumbing.cells import NOT_UNDER_NCU, SECTION_DEPENDENCY, SECTION_PLAN, report_folders_of

# ---------------------------------------------------------------- the recorder leaves the runner's clocks alone
COMMITTED = recordings.recording_folders("ncu")


def _doubling_benchmark(clock_control):
    """Section 4's own benchmark for cold caches and the given clocks, built by the notebook's define cells with the
    L2 size of the committed recording (so its configs are the ones that recording profiled)."""
    environment = recordings.load_recording(COMMITTED[0])["environment"]
    namespace = ncu_namespace(*SECTION_PLAN[4]["define"], L2_BYTES=environment["l2_bytes"])
    return namespace["cold" if clock_control == "none" else "base_clock"]


def test_every_ncu_the_recorder_starts_gets_clock_control_none(patched):
    calls, log, work = patched
    with pytest.raises(Exception) as raised:  # no GPU, no report: nsight's own extraction fails after ncu ran
        _doubling_benchmark("none")()
    assert not isinstance(raised.value, recordings.RecorderError), f"the recorder refused: {raised.value}"
    assert log.exists(), "nsight's collect never started ncu through the recorder"
    argv = json.loads(log.read_text())
    assert argv[argv.index("--clock-control") + 1] == "none", f"ncu was started with {argv}"


def test_the_recorder_refuses_to_start_ncu_with_base_clocks_or_ncus_default(tmp_path):
    attach, _ = ncu_launch.nsight_attach_command(
        nsight_ncu.launch_ncu, f"{tmp_path}/report.ncu-rep", ["gpu__time_duration.sum"], "all", "base", "kernel",
        nsight.VerbosityLevel.SILENT,
    )  # fmt: skip
    with pytest.raises(recordings.RecorderError, match="without --clock-control none"):
        ncu_launch.launch_command(attach, "ncu", ["python3"])  # base clocks: the runner is shared
    at = attach.index("--clock-control")
    with pytest.raises(recordings.RecorderError, match="without --clock-control none"):
        ncu_launch.launch_command(attach[:at] + attach[at + 2 :], "ncu", ["python3"])  # ncu's default is base


def test_a_base_clock_call_no_committed_recording_holds_is_refused_and_never_run(patched, monkeypatch):
    calls, log, work = patched
    monkeypatch.setattr(ncu_launch, "recording_folders", lambda *args: [])
    with pytest.raises(recordings.RecorderError, match=r"clock_control='base', which this recorder refuses") as no:
        _doubling_benchmark("base")()
    assert "No committed recording holds this call" in str(no.value), str(no.value)
    assert not log.exists(), "ncu was started for a clock_control='base' call"


def test_a_base_clock_call_is_served_from_the_committed_recording_that_ran_it(patched):
    """The committed recording holds section 4's base-clock calls, served from the older recording that ran them:
    nsight's collect gets that call's raw frame and rebuilds the frame the committed recording kept, and the call
    names the recording that ran it (not the one that served it again)."""
    import pandas as pd

    calls, log, work = patched
    recording = recordings.load_recording(COMMITTED[0])
    served = _doubling_benchmark("base")().to_dataframe()
    assert not log.exists(), "ncu was started for a clock_control='base' call"
    pd.testing.assert_frame_equal(served, recording["variables"]["condition_frames"]["base clock"])
    committed = next(c for c in recording["calls"] if c.get("clock_control") == "base" and c["cache_control"] == "all")
    assert calls.calls[-1]["served_from"] == committed["served_from"], "the call must name the recording that ran it"
    source = calls.calls[-1]["served_from"]
    assert source["notebook_commit"] != recording["provenance"]["notebook_commit"], (
        f"{source['label']}: a call served again names the recording that ran it, not the one that served it"
    )


def test_a_base_clock_call_is_never_served_from_a_recording_of_another_gpus_sizes(patched, monkeypatch, tmp_path):
    """Section 4's sizes follow the GPU's L2: a recording of the same call on another GPU (other sizes) holds no row
    for this one, and serving it would put another GPU's times under these sizes."""
    calls, log, _ = patched
    recording = recordings.load_recording(COMMITTED[0])
    raw = json.loads((COMMITTED[0] / "recording.json").read_text())
    other = tmp_path / "other-gpu-ncu-recording"
    other.mkdir()
    for call in raw["calls"]:
        if call.get("configs"):  # the same calls, profiled at twice the sizes (a GPU with twice the L2)
            call["configs"] = [[2 * value for value in config] for config in call["configs"]]
    (other / "recording.json").write_text(json.dumps(raw))
    monkeypatch.setattr(ncu_launch, "recording_folders", lambda *args: [other])
    with pytest.raises(recordings.RecorderError, match="No committed recording holds this call"):
        _doubling_benchmark("base")()
    assert not log.exists(), "ncu was started for a clock_control='base' call"
    assert recording["environment"]["l2_bytes"], "the sizes come from the recorded GPU's L2"


def _record_ncu(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts/record_ncu.py"), *args], capture_output=True, text=True)


def test_plan_lists_every_section_that_profiles_and_the_metrics_without_a_gpu():
    done = _record_ncu("--plan")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    prelude = [f"section -: {cell_id} (prelude)" for cell_id in recordings.prelude_cell_ids(recordings.load_cells())]
    assert lines[: len(prelude)] == prelude, (
        f"the plan must start with the shared cells (harness, setup helpers, the define cells of SHARED_NAMES), "
        f"before any section's:\n{chr(10).join(lines[: len(prelude) + 2])}"
    )
    sections = {int(line.split(":")[0].split()[1]) for line in lines if re.match(r"section \d+:", line)}
    assert sections == set(SECTION_PLAN), f"the plan records sections {sorted(sections)}, not {sorted(SECTION_PLAN)}"
    assert "section 2: s2-run (run, each profiled call under its own ncu)" in lines
    assert "section 9: s9-cupti (run)" in lines, "the CUPTI child must never run under ncu"
    for cell_id in SECTION_PLAN[10]["run"]:
        assert f"section 10: {cell_id} (run)" in lines, f"{cell_id} starts its own ncu: run in the outer, kept"
    assert "gpu__time_duration.sum" in lines[-2]


def test_the_tu104_listing_covers_every_metric_family_the_notebook_names():
    """Whole names, names built in f-strings (launch__occupancy_limit_{kind}) and patterns (smsp__..._stalled_)."""
    families = record_ncu.metric_families(recordings.load_cells())
    for family in ("lts__", "smsp__", "sm__", "dram__", "gpu__", "gpc__"):
        assert family in families, f"the tu104 listing would leave out {family}: check metric_families"


def test_plan_of_section_10_alone_says_where_the_sections_it_reads_come_from():
    done = _record_ncu("--plan", "--sections", "10")
    assert done.returncode == 0, done.stderr
    for number in SECTION_DEPENDENCY[10]:
        assert f"section {number}: read by [10], taken from the recording in docs/verified" in done.stdout
    others = re.findall(r"^section [2-9]: \S+ \((?!recorded )", done.stdout, re.M)
    assert not others, f"only section 10's cells are recorded; the ones it reads come from the recording: {others}"


def test_the_staleness_check_sees_what_every_visible_define_cell_binds_if_use_ncu_blocks_included():
    """test_ncu_recordings compares the recording's define values with these names: a define cell whose body sits
    in `if USE_NCU:` (sections 4, 6, 7, 10) must still give its names."""
    cells = recordings.load_cells()
    for number, plan in SECTION_PLAN.items():
        for cell_id in plan.get("define", ()):
            source = recordings.cell_source(cells, cell_id)
            if source.lstrip().startswith("# @title"):
                continue  # folded plumbing, not a benchmark setting
            bound = recordings.top_level_names(source)
            assert bound, f"{cell_id} binds no name the recording is compared on: check top_level_names"
            assert bound <= recordings.benchmark_setting_names(cells, [number]), cell_id
    assert {"CONDITION_METRICS", "BOUND_METRICS", "FUSION_N", "FUSION_METRICS"} <= (
        recordings.benchmark_setting_names(cells)
    ), "the Nsight Compute sections' settings (inside if USE_NCU:) must be compared"


@pytest.mark.parametrize("bad", ["11", "1", "two", "2-12"])
def test_a_section_it_cannot_record_is_refused_with_the_ones_it_can(bad):
    done = _record_ncu("--plan", "--sections", bad)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--sections" in done.stderr and ("records sections" in done.stderr or "like 2,3,9" in done.stderr)


def test_an_inner_process_replays_only_the_shared_cells_and_its_own_sections_define_and_run_cells():
    cells = recordings.load_cells()
    shared = recordings.prelude_cell_ids(cells)
    for number in SECTION_PLAN:
        steps = record_ncu.inner_plan(cells, number)
        ids = [cell_id for _, cell_id, _ in steps]
        own = [cell_id for cell_id, role in recordings.section_steps(cells, number) if role != "analysis"]
        expected = shared + [
            cell_id for cell_id in own if cell_id not in NOT_UNDER_NCU and cell_id != f"s{number}-open"
        ]
        assert ids == expected, f"section {number}: the inner replays {ids}, expected {expected}"


def test_section_10_without_the_sections_it_reads_reads_them_from_a_recording_or_says_to_record_them_together(
    tmp_path,
):
    work = tmp_path / "work"
    with pytest.raises(recordings.RecorderError, match=r"--sections 6,8,10"):
        record_ncu.needed_reports([10], tmp_path / "empty", work)
    recorded = record_ncu.needed_reports([10], COMMITTED[0].parent, work)
    assert {"6", "8"} <= set(recorded["sections"]), "the recording that stands in must hold sections 6 and 8"
    restored = sorted(path.name for path in (work / "out" / "s8_off").iterdir())
    assert any(name.endswith(".ncu-rep") for name in restored), restored
    for own in report_folders_of(10):
        assert not (work / "out" / own).exists(), f"section 10's own {own}/ must be made again, not kept"
    assert record_ncu.needed_reports([6, 8, 10], tmp_path / "empty", tmp_path / "other") is None  # recorded together


def test_a_section_recorded_without_the_sections_it_reads_replays_them_from_the_recording_first():
    cells = recordings.load_cells()
    steps = recordings.plan(cells, [10])
    sections = [number for number, _, _ in steps if number is not None]
    assert sections == sorted(sections) and set(sections) == {6, 8, 10}, f"6 and 8 must run before 10: {sections}"
    for number, cell_id, role in steps:
        if number in (6, 8):
            assert role.startswith("recorded "), f"{cell_id} ({role}): sections 6 and 8 are read, not recorded again"
    assert [step for step in steps if step[0] == 10] == [
        (10, cell_id, role) for cell_id, role in recordings.section_steps(cells, 10)
    ]
    assert not any(role.startswith("recorded ") for _, _, role in recordings.plan(cells, [6, 8, 10]))


# ---------------------------------------------------------------- every ncu a cell starts leaves the clocks alone
FAKE_REPORTING_NCU = """#!{python}
import sys
from pathlib import Path
args = sys.argv[1:]
Path(args[args.index("-o") + 1] + ".ncu-rep").write_text("report")
"""


def test_an_ncu_command_line_without_clock_control_none_is_refused_before_it_starts(tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\ntouch started\n")
    fake.chmod(0o755)
    with ncu_launch.NcuGuard(str(fake)) as guard:
        for argv in ([str(fake), "--clock-control", "base", "python3", "x.py"], [str(fake), "python3", "x.py"]):
            with pytest.raises(recordings.RecorderError, match="without --clock-control none"):
                subprocess.run(argv, cwd=tmp_path)
        subprocess.run([str(fake), "--version"], cwd=tmp_path, check=True)  # a query profiles nothing
        inner = [str(fake), "--clock-control", "none", *ncu_launch.inner_program(tmp_path, "4-0")]
        subprocess.run(inner, cwd=tmp_path, check=True)  # a profiled call's own ncu: checked, counted with the call
    assert guard.runs == [] and subprocess.Popen is guard.saved, (
        "the guard must count nothing and leave Popen as it was"
    )


FAKE_SECTION_10_NCU = """#!{python}
# Stands in for ncu in section 10's own command lines: a profile writes the committed report with sections where -o
# says; `--import ... --page details` prints a page, as ncu does.
import shutil, sys
args = sys.argv[1:]
if "--import" in args:
    print("  Section: GPU Speed Of Light Throughput (details of " + args[args.index("--import") + 1] + ")")
    sys.exit(0)
shutil.copy({report!r}, args[args.index("-o") + 1] + ".ncu-rep")
"""


def test_section_10_alone_runs_in_the_outer_on_the_sections_it_reads_from_the_recording_every_ncu_with_clock_none(
    tmp_path, monkeypatch
):
    """record_ncu.py --sections 10, simulated up to s10-details with a fake ncu: sections 6 and 7 come from the
    committed recording (their run cells' values, their analysis cells run), section 10's own ncu command lines run
    through the guard. s10-stalls and s10-record need a WarpStateStats report that only the runner makes."""
    import lzma

    work, dest_root = tmp_path / "work", COMMITTED[0].parent
    (work / "calls").mkdir(parents=True)
    report = tmp_path / "sections.ncu-rep"
    report.write_bytes(lzma.decompress(next((COMMITTED[0] / "s10_softmax").glob("*.ncu-rep.xz")).read_bytes()))
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_SECTION_10_NCU.format(python=sys.executable, report=str(report)))
    fake.chmod(0o755)
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(work / "out"))
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)  # as imported with NSPY_NCU_INIT_AT_IMPORT=0
    recorded = record_ncu.needed_reports([10], dest_root, work)
    environment = {**recorded["environment"], **record_ncu.LAUNCH_MODE, "ncu_path": str(fake)}
    monkeypatch.setattr(  # no torch and no GPU here: the GPU machine's facts come from the recording
        record_ncu,
        "section_one_names",
        lambda namespace, environment=None: record_ncu.name_section_one(
            namespace, {**environment_here, **(environment or {})}, torch=None
        ),
    )
    environment_here = environment
    steps = [step for step in recordings.plan(recordings.load_cells(), [10])]
    calls = ncu_launch.ProfiledCalls(work, "outer", ncu=str(fake), log=lambda *_: None)
    try:
        with ncu_launch.NcuGuard(str(fake)) as guard:
            done = record_ncu.replay(steps, calls, guard, log=lambda *_: None, recorded=recorded)
    finally:
        calls.uninstall()
    failures = {cell: run["output"][-1500:] for cell, run in done["runs"].items() if run.get("failed")}
    assert not failures, f"cells failed under the recorder's outer process: {failures}"
    assert calls.calls == [], "section 10 starts no nsight-python call, and the sections it reads are read, not run"
    assert len(guard.runs) == 1 and all("--clock-control none" in run for run in guard.runs), guard.runs
    assert "--kernel-name regex:softmax --launch-skip 1 --launch-count 1" in guard.runs[0], (
        f"section 10 must profile the softmax's second launch (the first warms up), by name: {guard.runs[0]}"
    )
    namespace = done["namespace"]
    assert "torch.softmax" in namespace["softmax_body"], "section 10 must profile section 6's softmax"
    details = [run["output"] for run in done["runs"].values() if "Speed Of Light" in run.get("output", "")]
    assert details, "the Details page ncu --import printed must be kept as its cell's output"


FAKE_INNER_NCU = """#!{python}
# Stands in for ncu: a profiled call's ncu notes the session time the inner would have written (it writes no report);
# section 10's `--import ... --page details` prints a page; its profiles write a file that is no report.
import json, sys
from pathlib import Path
args = sys.argv[1:]
if "--import" in args:
    print("details")
elif "--inner" in args:
    work, call = Path(args[args.index("--work") + 1]), args[args.index("--call") + 1]
    Path(work, "calls", call + ".session.json").write_text(json.dumps({{"session_s": 0.5}}))
else:
    Path(args[args.index("-o") + 1] + ".ncu-rep").write_text("no report")
"""
NO_REPORT = "No NVIDIA Nsight Compute report found"  # nsight's own extraction, after ncu ran: no GPU, no report


def test_the_whole_plan_runs_on_a_cpu_up_to_each_sections_first_profiled_call_or_gpu_only_step(tmp_path, monkeypatch):
    """record_ncu.py (sections 2 to 10) simulated: the shared cells, section 1's names as the recorder makes them,
    and every section's cells in plan order, each profiled call through nsight's real collect to a fake ncu. Without
    a GPU each section must get as far as its first profiled call (which nsight's extraction then finds without a
    report), or, for sections 8 and 9, to the first cell that needs the GPU machine (NVML, libcupti): a NameError or
    KeyError anywhere before that would wait for the runner."""
    work = tmp_path / "work"
    (work / "calls").mkdir(parents=True)
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_INNER_NCU.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(work / "out"))
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)  # as imported with NSPY_NCU_INIT_AT_IMPORT=0
    recorded = recordings.load_recording(COMMITTED[0])["environment"]
    facts = {**recorded, **record_ncu.LAUNCH_MODE, "ncu_path": str(fake)}
    monkeypatch.setattr(  # no torch and no GPU here: the GPU machine's facts come from the recording
        record_ncu, "section_one_names", lambda namespace, environment=None: record_ncu.name_section_one(
            namespace, {**facts, **(environment or {})}, torch=None
        )
    )  # fmt: skip
    cells = recordings.load_cells()
    calls = ncu_launch.ProfiledCalls(work, "outer", ncu=str(fake), log=lambda *_: None)
    try:
        with ncu_launch.NcuGuard(str(fake)) as guard:
            done = record_ncu.replay(recordings.plan(cells, record_ncu.SECTIONS), calls, guard, log=lambda *_: None)
    finally:
        calls.uninstall()
    last_line = {
        cell: run["output"].strip().splitlines()[-1] for cell, run in done["runs"].items() if run.get("failed")
    }
    gpu_only = {8: "No module named 'pynvml'|NVML", 9: "libcupti"}
    for number in record_ncu.SECTIONS:
        failed = done["failed"].get(number)
        if number in SECTION_DEPENDENCY:
            assert failed and "which it reads" in failed, f"section {number} must stop with the section it reads"
            continue
        if number in gpu_only and failed in last_line and re.search(gpu_only[number], last_line[failed]):
            continue
        first_call = next((call for call in calls.calls if call["section"] == number), None)
        assert first_call is not None and failed == first_call["cell"], (
            f"section {number} stopped in {failed}: {last_line.get(failed)} (before its first profiled call)"
        )
        assert NO_REPORT in last_line[failed], f"section {number}'s first call failed otherwise: {last_line[failed]}"
        assert "--clock-control none" in first_call["command"], first_call["command"]
    assert done["failed"].keys() == set(record_ncu.SECTIONS), f"a section ended ok without a GPU: {done['failed']}"


# ---------------------------------------------------------------- values <-> JSON, shared with record_cupti.py
def test_frames_with_an_index_and_series_survive_the_json_round_trip():
    import pandas as pd

    table = pd.DataFrame({"fp32": [1.5, 2.5], "fp16": [3.0, 4.0]}, index=pd.Index([512, 1024], name="n"))
    table.columns.name = "Annotation"
    row = pd.Series({"AvgValue": 1.5e5, "Kernel": "ampere_sgemm", "NumRuns": 10}, name=0)
    plain = pd.DataFrame({"n": [1, 2], "Unit": ["ns", "ns"]})
    back = recordings.decode(json.loads(json.dumps(recordings.encode({"t": table, "r": row, "p": plain}))))
    pd.testing.assert_frame_equal(back["t"], table)
    pd.testing.assert_series_equal(back["r"], row)
    pd.testing.assert_frame_equal(back["p"], plain)


def test_an_inner_replay_serves_earlier_calls_so_nsight_rebuilds_the_recorded_frame(tmp_path, monkeypatch):
    """Under ncu, the inner process replays the cells; every call before its own is answered with the raw frame the
    outer extracted. Served the committed recording's raw frame, nsight's own aggregation must give back the frame
    the recording holds for the notebook's variable (section 6: limits_frame)."""
    import pickle

    import pandas as pd

    recording = recordings.load_recording(COMMITTED[0])
    call = next(call for call in recording["calls"] if call["section"] == 6)
    work = tmp_path / "work"
    (work / "calls").mkdir(parents=True)
    (work / "calls" / "6-0.pkl").write_bytes(pickle.dumps(("frame", recordings.decode(call["raw_frame"]))))
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)  # as imported with NSPY_NCU_INIT_AT_IMPORT=0
    namespace = ncu_namespace(*SECTION_PLAN[6]["define"])
    calls = ncu_launch.ProfiledCalls(work, "inner", target="6-1", log=lambda *_: None)
    calls.install()
    calls.where = (6, RUN[6])
    try:
        rebuilt = namespace["three_kernels"]().to_dataframe()
    finally:
        calls.uninstall()
    pd.testing.assert_frame_equal(rebuilt, recording["variables"]["bound_frame"])
