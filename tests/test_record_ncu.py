"""scripts/record_ncu.py's mechanism on CPU: the ncu command it builds from nsight's own, nsight's collect driven
through the patched functions up to the report, the check that names what moved in a new nsight-python, the plan,
and the clock policy: every ncu it starts gets --clock-control none; a clock_control='base' call is never run but
served from the committed recording that ran it (section 4's own benchmark, through nsight's real collect), or
refused with the reason when no committed recording holds it.

What needs a GPU (the inner replay under ncu, the report itself) is exercised by the lead on the GPU runner; the
committed recording's analysis is tested in test_ncu_recordings.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import ncu_launch
import nsight
import pytest
import record_ncu
import recorder_input
import recordings
from nsight.collection import ncu as nsight_ncu
from support import ROOT, WITHOUT_MODULES, ncu_namespace

from plumbing.cells import HARNESS, NOT_UNDER_NCU, SECTION_DEPENDENCY, SECTION_PLAN, report_folders_of


def _launch(cache_control="all", clock_control="none", replay_mode="kernel", tmp_path=None):
    report = f"{tmp_path}/ncu-output-bench-0.ncu-rep"
    attach, log_path = ncu_launch.nsight_attach_command(
        nsight_ncu.launch_ncu, report, ["gpu__time_duration.sum", "dram__bytes_read.sum"], cache_control,
        clock_control, replay_mode, nsight.VerbosityLevel.SILENT,
    )  # fmt: skip
    return attach, ncu_launch.launch_command(attach, "/opt/ncu/ncu", ["python3", "inner.py"]), report, log_path


def _option(command, name):
    return command[command.index(name) + 1]


@pytest.mark.parametrize(("cache", "clock"), [("all", "none"), ("none", "none")])
def test_launch_command_passes_nsights_own_settings_to_ncu(tmp_path, cache, clock):
    attach, command, report, log_path = _launch(cache, clock, tmp_path=tmp_path)
    assert command[:2] == ["/opt/ncu/ncu", "--nvtx"] and command[-2:] == ["python3", "inner.py"]
    assert (_option(command, "--cache-control"), _option(command, "--clock-control")) == (cache, clock)
    assert _option(command, "--nvtx-include") == "regex:nsight-python@.+", "only nsight's NVTX ranges are profiled"
    assert _option(command, "--replay-mode") == "kernel"
    assert _option(command, "--metrics") == "gpu__time_duration.sum,dram__bytes_read.sum"
    assert _option(command, "-o") == report and _option(command, "--log-file") == log_path
    assert "--mode" not in command and "--process-id" not in command, "launch mode: ncu starts the process"
    flags = [token for token in attach[1:] if token not in ("--mode", "attach", "--process-id", str(os.getpid()))]
    assert command[2:-2] == flags, "every other flag must be nsight's own, in nsight's order"


def test_an_attach_command_without_the_attach_options_is_refused():
    with pytest.raises(recordings.RecorderError, match="--mode attach"):
        ncu_launch.launch_command(["ncu", "--metrics", "x", "-o", "r"], "ncu", ["python3"])


def test_the_installed_nsight_has_everything_the_recorder_patches():
    assert ncu_launch.nsight_internals_problems() == []


def test_a_function_gone_from_nsight_is_named(monkeypatch):
    monkeypatch.delattr(nsight_ncu, "begin_profiling")
    with pytest.raises(recordings.RecorderError, match=r"nsight\.collection\.ncu\.begin_profiling is gone"):
        ncu_launch.check_nsight_internals()


def test_a_changed_signature_is_named(monkeypatch):
    def launch_ncu(report_path, metrics, clock_control, cache_control, replay_mode, verbosity):  # swapped
        raise AssertionError("never called")

    monkeypatch.setattr(nsight_ncu, "launch_ncu", launch_ncu)
    problems = ncu_launch.nsight_internals_problems()
    assert problems and "launch_ncu takes" in problems[0], problems


def test_a_collect_that_stopped_calling_a_patched_function_is_named(monkeypatch):
    def collect(self, func, configs, settings):
        return nsight_ncu.launch_ncu  # no longer calls begin/end profiling, run_profile_session, extraction

    monkeypatch.setattr(nsight_ncu.NCUCollector, "collect", collect)
    problems = " ".join(ncu_launch.nsight_internals_problems())
    assert "no longer calls begin_profiling" in problems and "no longer calls extract_df_from_report" in problems


def test_nsights_collect_runs_through_the_patches_to_ncu_and_its_own_extraction(patched):
    calls, log, work = patched
    assert nsight.get_active_tool() is None, "the recorder loads no injection library"

    def add_kernels(x, y):
        return x + y

    @nsight.analyze.kernel(runs=2, thermal_mode="off", cache_control="all", clock_control="none",
                           combine_kernel_metrics=add_kernels, output_prefix=f"{work}/out/s4/",
                           verbosity=nsight.VerbosityLevel.SILENT)  # fmt: skip
    def bench(n):
        raise AssertionError("the outer process never runs the benchmark: the inner does, under ncu")

    with pytest.raises(Exception) as raised:  # no GPU, no report: nsight's own extraction says so
        bench(8)
    assert log.exists(), f"collect never launched ncu through the patches; it raised {raised.value!r}"
    argv = json.loads(log.read_text())
    assert (_option(argv, "--cache-control"), _option(argv, "--clock-control")) == ("all", "none")
    assert argv[-7:] == [
        sys.executable,
        str(ROOT / "scripts" / "record_ncu.py"),
        "--inner",
        "--work",
        str(work),
        "--call",
        "4-0",
    ]
    call = calls.calls[0]
    assert (call["section"], call["benchmark"], call["runs"], call["session_s"]) == (4, "bench", 2, 0.5)
    assert call["error"]["type"] == type(raised.value).__name__, "nsight's extraction error is recorded"
    assert call["combine_kernel_metrics"] == "add_kernels" and call["tag"].startswith("bench-")
    kept = json.dumps({key: call[key] for key in ("command", "nsight_attach_command", "process_output_tail")})
    assert "WORK/out/s4/report.ncu-rep" in kept and str(work) not in kept and str(ROOT) not in kept, (
        f"a recorded call must show this machine's paths relative to WORK or REPO (they are committed): {kept}"
    )


def test_a_cell_run_only_for_its_definitions_may_not_profile(patched):
    calls, _, _ = patched
    calls.allowed = False

    @nsight.analyze.kernel(runs=1, thermal_mode="off", verbosity=nsight.VerbosityLevel.SILENT)
    def bench(n):
        pass

    with pytest.raises(recordings.RecorderError, match="run only for its definitions"):
        bench(1)


# ---------------------------------------------------------------- the recorder leaves the runner's clocks alone
COMMITTED = recordings.recording_folders("ncu")
RUN = {number: plan["run"][0] for number, plan in SECTION_PLAN.items()}  # each section's (first) run cell


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
    assert _option(argv, "--clock-control") == "none", f"ncu was started with {argv}"


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


# ---------------------------------------------------------------- the recording library's own decisions
def test_a_cell_run_keeps_its_source_what_it_printed_the_value_it_showed_and_the_data_it_bound():
    namespace: dict = {"__name__": "__main__", "kept": 1}
    source = "import math\nprint('hello')\ntable = {'n': [1, 2]}\nkept = kept\nscale = lambda x: 2 * x\nlen(table['n'])"
    run = recordings.run_cell(namespace, source, "s2-demo", echo=False)
    assert run["source"] == source
    assert run["output"] == "hello\n2\n", "what it printed, then its last line's value, as a notebook shows them"
    assert run["variables"] == {"table": {"n": [1, 2]}}, (
        "only the data the cell bound or rebound: not modules, functions or names it left as they were"
    )


def test_a_failing_cell_keeps_what_it_printed_before_it_failed():
    with pytest.raises(ZeroDivisionError) as raised:
        recordings.run_cell({}, "print('before')\n1 / 0", "s2-demo", echo=False)
    assert raised.value.cell_output == "before\n"


@pytest.mark.parametrize(("text", "sections"), [("2-5", [2, 3, 4, 5]), ("9,2", [2, 9]), (None, list(SECTION_PLAN))])
def test_sections_are_read_as_the_numbers_given_and_all_by_default(text, sections):
    assert recorder_input.parse_sections(text, SECTION_PLAN) == sections


def _recording(sections: dict, commit: str) -> dict:
    return {
        "format": recordings.FORMAT, "mode": "ncu", "provenance": {"notebook_commit": commit},
        "sections": {str(n): {"status": "ok", "notebook_commit": commit} for n in sections},
        "cells": {
            HARNESS: {"section": None, "role": "prelude", "source": commit},
            **{cell: {"section": n, "role": "run", "source": commit} for n, cell in sections.items()},
        },
        "calls": [{"section": n, "cell": cell} for n, cell in sections.items()],
        "figures": [{"section": n} for n in sections],
    }  # fmt: skip


def test_recording_some_sections_keeps_the_others_as_they_were(tmp_path):
    recordings.write_recording(tmp_path, _recording({n: RUN[n] for n in (2, 3)}, "old"), [2, 3])
    recordings.write_recording(tmp_path, _recording({3: RUN[3]}, "new"), [3])
    merged = json.loads((tmp_path / "recording.json").read_text())
    assert {n: info["notebook_commit"] for n, info in merged["sections"].items()} == {"2": "old", "3": "new"}
    assert merged["cells"][RUN[2]]["source"] == "old" and merged["cells"][RUN[3]]["source"] == "new"
    assert [(call["section"], call["cell"]) for call in merged["calls"]] == [(2, RUN[2]), (3, RUN[3])]
    assert [figure["section"] for figure in merged["figures"]] == [2, 3]


def test_a_sections_cost_counts_the_ncu_processes_it_started_not_the_calls_served_from_elsewhere():
    calls = [
        {"section": 4, "ncu_wall_s": 9.5, "session_s": 3.0},
        {"section": 4, "served_from": {"label": "older"}, "ncu_wall_s": 99.0},
        {"section": 6, "ncu_wall_s": 5.0, "session_s": 1.0},
    ]
    cost = record_ncu.section_cost(4, calls, guard_runs=1, wall_s=12.345)
    assert cost == {"wall_s": 12.35, "ncu_processes": 2, "profiled_calls": 1, "served_calls": 1, "ncu_wall_s": 9.5,
                    "session_s": 3.0}  # fmt: skip


def test_a_python_without_what_the_cells_import_is_named_before_anything_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MODULES.format(absent=("IPython",)), str(ROOT / "scripts/record_ncu.py"),
         "--dest", str(tmp_path / "dest")],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "NSPY_RECORD_WORK": str(tmp_path / "work")},
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "lacks IPython" in done.stderr and "scripts/setup_gpu_runner" in done.stderr, done.stderr
    assert not (tmp_path / "dest").exists() and not (tmp_path / "work").exists(), "nothing may be written"


def test_the_recorded_commit_is_the_one_the_recorder_is_told_else_the_clones_head(monkeypatch):
    """On the GPU runner the tree arrives without its git history: NSPY_RECORD_COMMIT names the commit recorded."""
    told = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv("NSPY_RECORD_COMMIT", told)
    assert recordings.notebook_commit() == told, "the commit the recorder was told must be the one it records"
    monkeypatch.delenv("NSPY_RECORD_COMMIT")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert recordings.notebook_commit() == (head or "unknown")


def test_a_hung_ncu_is_stopped_at_its_time_limit_and_the_call_named(tmp_path, monkeypatch):
    from kernel_session import ends_soon

    monkeypatch.setattr(ncu_launch, "NCU_CALL_TIMEOUT_S", 1)
    calls = ncu_launch.ProfiledCalls(tmp_path, "outer", ncu="ncu", log=lambda *_: None)
    hung = subprocess.Popen(["sleep", "8"])  # longer than the limit; ends by itself if the limit is ignored
    call = {"index": "6-0", "benchmark": "limits_benchmark", "cell": RUN[6], "started": 0.0, "report": "r.ncu-rep"}
    with pytest.raises(recordings.RecorderError, match=rf"call 6-0 \(limits_benchmark, cell {RUN[6]}\) did not finish"):
        calls.finished(call, hung, tmp_path / "6-0.out")
    assert ends_soon(hung.pid), "the hung ncu lives on after its time limit"


def test_an_ncu_that_exits_non_zero_fails_the_call_though_the_inner_process_finished(tmp_path):
    calls = ncu_launch.ProfiledCalls(tmp_path, "outer", ncu="ncu", log=lambda *_: None)
    (tmp_path / "calls").mkdir()
    (tmp_path / "calls" / "6-0.session.json").write_text(json.dumps({"session_s": 1.5}))  # the inner got through
    (tmp_path / "6-0.out").write_text("==ERROR== the report could not be written\n")
    failed = subprocess.Popen(["sh", "-c", "exit 3"])
    call = {"index": "6-0", "benchmark": "limits_benchmark", "cell": RUN[6], "started": 0.0, "report": "r.ncu-rep"}
    with pytest.raises(recordings.RecorderError, match=r"exit 3[\s\S]*the report could not be written"):
        calls.finished(call, failed, tmp_path / "6-0.out")
