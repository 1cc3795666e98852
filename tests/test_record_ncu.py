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
import subprocess
import sys

import nsight
import pytest
from conftest import ROOT
from nsight.collection import ncu as nsight_ncu

sys.path.insert(0, str(ROOT / "scripts"))
import record_ncu  # noqa: E402


def _launch(cache_control="all", clock_control="none", replay_mode="kernel", tmp_path=None):
    report = f"{tmp_path}/ncu-output-bench-0.ncu-rep"
    attach, log_path = record_ncu.nsight_attach_command(
        nsight_ncu.launch_ncu, report, ["gpu__time_duration.sum", "dram__bytes_read.sum"], cache_control,
        clock_control, replay_mode, nsight.VerbosityLevel.SILENT,
    )  # fmt: skip
    return attach, record_ncu.launch_command(attach, "/opt/ncu/ncu", ["python3", "inner.py"]), report, log_path


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
    with pytest.raises(record_ncu.RecorderError, match="--mode attach"):
        record_ncu.launch_command(["ncu", "--metrics", "x", "-o", "r"], "ncu", ["python3"])


def test_the_installed_nsight_has_everything_the_recorder_patches():
    assert record_ncu.nsight_internals_problems() == []


def test_a_function_gone_from_nsight_is_named(monkeypatch):
    monkeypatch.delattr(nsight_ncu, "begin_profiling")
    with pytest.raises(record_ncu.RecorderError, match=r"nsight\.collection\.ncu\.begin_profiling is gone"):
        record_ncu.check_nsight_internals()


def test_a_changed_signature_is_named(monkeypatch):
    def launch_ncu(report_path, metrics, clock_control, cache_control, replay_mode, verbosity):  # swapped
        raise AssertionError("never called")

    monkeypatch.setattr(nsight_ncu, "launch_ncu", launch_ncu)
    problems = record_ncu.nsight_internals_problems()
    assert problems and "launch_ncu takes" in problems[0], problems


def test_a_collect_that_stopped_calling_a_patched_function_is_named(monkeypatch):
    def collect(self, func, configs, settings):
        return nsight_ncu.launch_ncu  # no longer calls begin/end profiling, run_profile_session, extraction

    monkeypatch.setattr(nsight_ncu.NCUCollector, "collect", collect)
    problems = " ".join(record_ncu.nsight_internals_problems())
    assert "no longer calls begin_profiling" in problems and "no longer calls extract_df_from_report" in problems


FAKE_NCU = """#!{python}
# Stands in for ncu: records its command line and what the inner would have written, then exits.
import json, sys
from pathlib import Path
args = sys.argv[1:]
Path({log!r}).write_text(json.dumps(args))
work, call = Path(args[args.index("--work") + 1]), args[args.index("--call") + 1]
Path(work, "calls", call + ".session.json").write_text(json.dumps({{"session_s": 0.5}}))
"""


@pytest.fixture
def patched(tmp_path, monkeypatch):
    """The outer recorder's patches on the installed nsight, with a fake ncu; undone afterwards."""
    log = tmp_path / "ncu_args.json"
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, log=str(log)))
    fake.chmod(0o755)
    work = tmp_path / "work"
    (work / "calls").mkdir(parents=True)
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(work / "out"))
    # The recorder imports nsight with NSPY_NCU_INIT_AT_IMPORT=0; this test process did not, and has no ncu.
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)
    calls = record_ncu.ProfiledCalls(work, "outer", ncu=str(fake), log=lambda *_: None)
    calls.install()
    calls.where = (4, "s4-run")
    yield calls, log, work
    calls.uninstall()


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
        "0",
    ]
    call = calls.calls[0]
    assert (call["section"], call["benchmark"], call["runs"], call["session_s"]) == (4, "bench", 2, 0.5)
    assert call["error"]["type"] == type(raised.value).__name__, "nsight's extraction error is recorded"
    assert call["combine_kernel_metrics"] == "add_kernels" and call["tag"].startswith("bench-")


def test_a_cell_run_only_for_its_definitions_may_not_profile(patched):
    calls, _, _ = patched
    calls.allowed = False

    @nsight.analyze.kernel(runs=1, thermal_mode="off", verbosity=nsight.VerbosityLevel.SILENT)
    def bench(n):
        pass

    with pytest.raises(record_ncu.RecorderError, match="run only for its definitions"):
        bench(1)


# ---------------------------------------------------------------- the recorder leaves the runner's clocks alone
COMMITTED = record_ncu.recording_folders()


def _doubling_benchmark(clock_control):
    """Section 4's own benchmark for cold caches and the given clocks, built by the notebook's s4-define cell with
    the L2 size of the committed recording (so its configs are the ones that recording profiled)."""
    environment = record_ncu.load_recording(COMMITTED[0])["environment"]
    cells = record_ncu.load_cells()
    namespace: dict = {"__name__": "__main__", "nsight": nsight, "QUIET": nsight.VerbosityLevel.SILENT,
                       "USE_NCU": True}  # fmt: skip
    for cell_id in ("harness", "setup-helpers"):
        record_ncu.run_cell(namespace, cells, cell_id)
    namespace["L2_BYTES"] = environment["l2_bytes"]
    record_ncu.run_cell(namespace, cells, "s4-define")
    return namespace["doubling_benchmarks"][("all", clock_control)]


def test_every_ncu_the_recorder_starts_gets_clock_control_none(patched):
    calls, log, work = patched
    with pytest.raises(Exception) as raised:  # no GPU, no report: nsight's own extraction fails after ncu ran
        _doubling_benchmark("none")()
    assert not isinstance(raised.value, record_ncu.RecorderError), f"the recorder refused: {raised.value}"
    assert log.exists(), "nsight's collect never started ncu through the recorder"
    argv = json.loads(log.read_text())
    assert _option(argv, "--clock-control") == "none", f"ncu was started with {argv}"


def test_the_recorder_refuses_to_start_ncu_with_base_clocks_or_ncus_default(tmp_path):
    attach, _ = record_ncu.nsight_attach_command(
        nsight_ncu.launch_ncu, f"{tmp_path}/report.ncu-rep", ["gpu__time_duration.sum"], "all", "base", "kernel",
        nsight.VerbosityLevel.SILENT,
    )  # fmt: skip
    with pytest.raises(record_ncu.RecorderError, match="without --clock-control none"):
        record_ncu.launch_command(attach, "ncu", ["python3"])  # base clocks: the runner is shared
    at = attach.index("--clock-control")
    with pytest.raises(record_ncu.RecorderError, match="without --clock-control none"):
        record_ncu.launch_command(attach[:at] + attach[at + 2 :], "ncu", ["python3"])  # ncu's default is base


def test_a_base_clock_call_no_committed_recording_holds_is_refused_and_never_run(patched, monkeypatch):
    calls, log, work = patched
    monkeypatch.setattr(record_ncu, "recording_folders", lambda root=None: [])
    with pytest.raises(record_ncu.RecorderError, match=r"clock_control='base', which this recorder refuses") as no:
        _doubling_benchmark("base")()
    assert "No committed recording holds this call" in str(no.value), str(no.value)
    assert not log.exists(), "ncu was started for a clock_control='base' call"


def test_a_base_clock_call_is_served_from_the_committed_recording_that_ran_it(patched):
    """The committed recording holds section 4's base-clock calls, served from the older recording that ran them:
    nsight's collect gets that call's raw frame and rebuilds the frame the committed recording kept, and the call
    names the recording that ran it (not the one that served it again)."""
    import pandas as pd

    calls, log, work = patched
    recording = record_ncu.load_recording(COMMITTED[0])
    served = _doubling_benchmark("base")().to_dataframe()
    assert not log.exists(), "ncu was started for a clock_control='base' call"
    pd.testing.assert_frame_equal(served, recording["variables"]["doubling_frames"][("all", "base")])
    committed = next(c for c in recording["calls"] if c.get("clock_control") == "base" and c["cache_control"] == "all")
    assert calls.calls[-1]["served_from"] == committed["served_from"], "the call must name the recording that ran it"
    source = calls.calls[-1]["served_from"]
    assert source["notebook_commit"] != recording["provenance"]["notebook_commit"], (
        f"{source['label']}: a call served again names the recording that ran it, not the one that served it"
    )


def test_plan_lists_the_cells_and_metrics_without_a_gpu():
    done = subprocess.run([sys.executable, str(ROOT / "scripts/record_ncu.py"), "--plan"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[:2] == ["section -: harness", "section -: setup-helpers"]
    assert "section 4: s4-run" in lines and "section 9: s9-ncu" in lines
    assert "gpu__time_duration.sum" in lines[-1]


# ---------------------------------------------------------------- values <-> JSON, shared with record_cupti.py
def test_frames_with_an_index_and_series_survive_the_json_round_trip():
    import pandas as pd

    table = pd.DataFrame({"fp32": [1.5, 2.5], "fp16": [3.0, 4.0]}, index=pd.Index([512, 1024], name="n"))
    table.columns.name = "Annotation"
    row = pd.Series({"AvgValue": 1.5e5, "Kernel": "ampere_sgemm", "NumRuns": 10}, name=0)
    plain = pd.DataFrame({"n": [1, 2], "Unit": ["ns", "ns"]})
    back = record_ncu.decode(json.loads(json.dumps(record_ncu.encode({"t": table, "r": row, "p": plain}))))
    pd.testing.assert_frame_equal(back["t"], table)
    pd.testing.assert_series_equal(back["r"], row)
    pd.testing.assert_frame_equal(back["p"], plain)


def test_an_inner_replay_serves_earlier_calls_so_nsight_rebuilds_the_recorded_frame(tmp_path, monkeypatch):
    """Under ncu, the inner process replays the cells; every call before its own is answered with the raw frame the
    outer extracted. Served the committed recording's raw frame, nsight's own aggregation must give back the frame
    the recording holds for the notebook's variable (section 6: limits_frame)."""
    import pickle

    import pandas as pd

    recording = record_ncu.load_recording(COMMITTED[0])
    call = next(call for call in recording["calls"] if call["cell"] == "s6-run")
    work = tmp_path / "work"
    (work / "calls").mkdir(parents=True)
    (work / "calls" / "0.pkl").write_bytes(pickle.dumps(("frame", record_ncu.decode(call["raw_frame"]))))
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)  # as imported with NSPY_NCU_INIT_AT_IMPORT=0
    cells = record_ncu.load_cells()
    namespace: dict = {"__name__": "__main__", "nsight": nsight, "QUIET": nsight.VerbosityLevel.SILENT,
                       "USE_NCU": True}  # fmt: skip
    for cell_id in ("harness", "setup-helpers", "s6-define"):
        record_ncu.run_cell(namespace, cells, cell_id)
    calls = record_ncu.ProfiledCalls(work, "inner", target=1, log=lambda *_: None)
    calls.install()
    try:
        rebuilt = namespace["limits_benchmark"]().to_dataframe()
    finally:
        calls.uninstall()
    pd.testing.assert_frame_equal(rebuilt, recording["variables"]["limits_frame"])
