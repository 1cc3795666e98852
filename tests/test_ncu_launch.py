"""recording/ncu_launch.py on CPU: the ncu command from nsight's own, the internals check, collect to a fake ncu."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import ncu_launch
import nsight
import pytest
import recordings
from nsight.collection import ncu as nsight_ncu
from support import ROOT, RUN


def _option(command, name):
    return command[command.index(name) + 1]


@pytest.mark.parametrize("cache", ["all", "none"])
def test_launch_command_passes_nsights_own_settings_to_ncu(tmp_path, cache):
    report, metrics = f"{tmp_path}/ncu-output-bench-0.ncu-rep", ["gpu__time_duration.sum", "dram__bytes_read.sum"]
    attach, log_path = ncu_launch.nsight_attach_command(nsight_ncu.launch_ncu, report, metrics, cache, "none", "kernel",
                                                        nsight.VerbosityLevel.SILENT)  # fmt: skip
    command = ncu_launch.launch_command(attach, "/opt/ncu/ncu", ["python3", "inner.py"])
    assert command[:2] == ["/opt/ncu/ncu", "--nvtx"] and command[-2:] == ["python3", "inner.py"]
    named = ["--cache-control", "--clock-control", "--replay-mode", "--metrics", "--nvtx-include", "-o", "--log-file"]
    assert [_option(command, o) for o in named] == [cache, "none", "kernel", ",".join(metrics),
            "regex:nsight-python@.+", report, log_path], "nsight's settings; only nsight's NVTX ranges"  # fmt: skip
    flags = [token for token in attach[1:] if token not in ("--mode", "attach", "--process-id", str(os.getpid()))]
    assert command[2:-2] == flags, "launch mode: no --mode attach --process-id; every other flag nsight's, in order"


@pytest.mark.parametrize(
    ("attach", "refused"),
    [(["ncu", "--metrics", "x", "-o", "r"], "--mode attach"),  # not nsight's attach command
     (["ncu", "--mode", "attach", "--process-id", "1", "python3"], "no '--clock-control")],  # ncu's default: base
)  # fmt: skip
def test_a_command_that_is_not_nsights_attach_or_would_change_the_clocks_is_refused(attach, refused):
    with pytest.raises(recordings.RecorderError, match=refused):
        ncu_launch.launch_command(attach, "ncu", ["python3"])


def test_a_call_that_asks_for_base_clocks_is_launched_with_the_clocks_left_as_they_are(tmp_path):
    report = f"{tmp_path}/ncu-output-bench-0.ncu-rep"
    asked = ("all", "base", "kernel", nsight.VerbosityLevel.SILENT)  # cache, clock, replay, verbosity
    attach, _ = ncu_launch.nsight_attach_command(nsight_ncu.launch_ncu, report, ["gpu__time_duration.sum"], *asked)
    assert _option(attach, "--clock-control") == "base", "nsight's own command asks for base clocks"
    command = ncu_launch.launch_command(attach, "/opt/ncu/ncu", ["python3"])
    assert _option(command, "--clock-control") == "none", f"the shared runner's clocks must stay: {command}"
    assert command.count("--clock-control") == 1, command


@pytest.mark.parametrize(
    ("attribute", "replacement", "named"),
    [(None, None, None), ("begin_profiling", None, r"nsight\.collection\.ncu\.begin_profiling is gone"),
     ("launch_ncu", lambda report_path, metrics, clock_control, cache_control: 0, "launch_ncu takes"),  # swapped
     ("collect", lambda self, func: 0, "no longer uses begin_profiling.*no longer uses extract_df_from_report")],
)  # fmt: skip
def test_what_moved_in_nsight_python_is_named_before_anything_runs(monkeypatch, attribute, replacement, named):
    if attribute:
        monkeypatch.setattr(nsight_ncu.NCUCollector if attribute == "collect" else nsight_ncu, attribute, replacement)
    with pytest.raises(recordings.RecorderError, match=named) if named else contextlib.nullcontext():
        ncu_launch.check_nsight_internals()  # unchanged: the installed nsight has all that the recorder patches


def test_nsights_collect_runs_through_the_patches_to_ncu_and_its_own_extraction(patched):
    calls, log, work = patched
    assert nsight.get_active_tool() is None, "the recorder loads no injection library"

    @nsight.analyze.kernel(runs=2, thermal_mode="off", cache_control="all", clock_control="none",
                           output_prefix=f"{work}/out/s4/", verbosity=nsight.VerbosityLevel.SILENT)  # fmt: skip
    def bench(n):
        raise AssertionError("the outer process never runs the benchmark: the inner does, under ncu")

    with pytest.raises(Exception) as raised:  # no GPU, no report: nsight's own extraction says so
        bench(8)
    assert log.exists(), f"collect never launched ncu through the patches; it raised {raised.value!r}"
    argv = json.loads(log.read_text())
    assert (_option(argv, "--cache-control"), _option(argv, "--clock-control")) == ("all", "none")
    assert argv[-6:] == [sys.executable, str(ROOT / "recording" / "ncu_inner.py"), "--work", str(work), "--call", "4-0"]
    call = calls.calls[0]
    assert [call[k] for k in ("section", "benchmark", "runs")] == [4, "bench", 2]
    assert call["error"]["type"] == type(raised.value).__name__, "nsight's extraction error is recorded"
    kept = json.dumps({key: call[key] for key in ("command", "nsight_attach_command", "process_output_tail")})
    assert "WORK/out/s4_all_none/report.ncu-rep" in kept and str(work) not in kept and str(ROOT) not in kept, (
        f"a recorded call must show this machine's paths relative to WORK or REPO (they are committed): {kept}"
    )
    calls.allowed = False  # a cell run only for its definitions
    with pytest.raises(recordings.RecorderError, match="run only for its definitions"):
        bench(8)


@pytest.mark.parametrize(
    ("command", "refused"),
    [(["sleep", "8"], rf"call 6-0 \(limits_benchmark, cell {RUN[6]}\) did not finish"),  # hung: stopped at 1 s
     (["sh", "-c", "exit 3"], r"exit 3[\s\S]*the report could not be written")],
)  # fmt: skip
def test_an_ncu_that_hangs_or_exits_non_zero_fails_its_call_naming_it(tmp_path, monkeypatch, command, refused):
    from kernel_session import ends_soon

    monkeypatch.setattr(ncu_launch, "NCU_CALL_TIMEOUT_S", 1)
    calls = ncu_launch.ProfiledCalls(tmp_path, "outer", ncu="ncu", log=lambda *_: None)
    (tmp_path / "6-0.out").write_text("==ERROR== the report could not be written\n")
    process = subprocess.Popen(command)
    call = {"index": "6-0", "benchmark": "limits_benchmark", "cell": RUN[6], "report": "r.ncu-rep"}
    with pytest.raises(recordings.RecorderError, match=refused):
        calls.finished(call, process, tmp_path / "6-0.out", started=0.0)
    assert ends_soon(process.pid), "the hung ncu lives on after its time limit"
