"""recording/ncu_launch.py on a CPU: the ncu command from nsight's own, the version check, a call's ncu ending."""

from __future__ import annotations

import os
import subprocess
import sys

import ncu_launch
import nsight
import pytest
from nsight.collection import ncu as nsight_ncu

from plumbing.cells import SECTION_PLAN

RUN_6 = SECTION_PLAN[6]["run"][0]


def _option(command, name):
    return command[command.index(name) + 1]


@pytest.mark.parametrize(("cache", "clocks"), [("all", "none"), ("none", "none"), ("all", "base")])
def test_launch_command_passes_nsights_own_settings_to_ncu_and_leaves_the_clocks_as_they_are(tmp_path, cache, clocks):
    report, metrics = f"{tmp_path}/ncu-output-bench-0.ncu-rep", ["gpu__time_duration.sum", "dram__bytes_read.sum"]
    attach, log_path = ncu_launch.nsight_attach_command(
        nsight_ncu.launch_ncu, report, metrics, cache, clocks, "kernel", nsight.VerbosityLevel.SILENT
    )
    assert _option(attach, "--clock-control") == clocks, "nsight's own command asks for the call's clocks"
    command = ncu_launch.launch_command(attach, "/opt/ncu/ncu", ["python3", "inner.py"])
    assert command[:2] == ["/opt/ncu/ncu", "--nvtx"] and command[-2:] == ["python3", "inner.py"]
    named = ["--cache-control", "--clock-control", "--replay-mode", "--metrics", "--nvtx-include", "-o", "--log-file"]
    wanted = [cache, "none", "kernel", ",".join(metrics), "regex:nsight-python@.+", report, log_path]  # none: always
    assert [_option(command, o) for o in named] == wanted, "nsight's settings; only nsight's NVTX ranges"
    flags = [token for token in attach[1:] if token not in ("--mode", "attach", "--process-id", str(os.getpid()))]
    flags[flags.index("--clock-control") + 1] = "none"
    assert command[2:-2] == flags, "launch mode: no --mode attach --process-id; every other flag nsight's, in order"


@pytest.mark.parametrize(
    ("attach", "refused"),
    [
        (["ncu", "--metrics", "x", "-o", "r"], "--mode attach"),  # not nsight's attach command
        (["ncu", "--mode", "attach", "--process-id", "1", "python3"], "no '--clock-control"),
    ],  # ncu's default: base
)
def test_a_command_that_is_not_nsights_attach_or_would_change_the_clocks_is_refused(attach, refused):
    with pytest.raises(ncu_launch.LaunchError, match=refused):
        ncu_launch.launch_command(attach, "ncu", ["python3"])


def test_an_nsight_that_loaded_ncu_at_import_or_another_version_is_refused_before_anything_is_patched(
    tmp_path, monkeypatch
):
    """The installed, pinned one loads: test_a_child_replays_its_section_up_to_its_call_... (test_launch_mode.py)."""
    monkeypatch.setenv("NSPY_NCU_INIT_AT_IMPORT", "1")  # load_nsight sets "0": monkeypatch restores it
    monkeypatch.setattr(nsight_ncu, "injection_load_error", "libnvperf loaded")  # as an import without the "0" does
    with pytest.raises(ncu_launch.LaunchError, match="tried to load Nsight Compute .*NSPY_NCU_INIT_AT_IMPORT=0"):
        ncu_launch.load_nsight(ncu_launch.ProfiledCalls(tmp_path, "inner"))
    monkeypatch.setattr(nsight, "__version__", "1.2.0")  # refused first
    with pytest.raises(ncu_launch.LaunchError, match=r"nsight-python 1\.2\.0 is installed.*nsight-python==1\.1\.0"):
        ncu_launch.load_nsight(ncu_launch.ProfiledCalls(tmp_path, "inner"))


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        (["sleep", "8"], rf"call 6-0 \(cell {RUN_6}\) did not finish"),  # hung: stopped at 1 s
        (["sh", "-c", "exit 3"], r"exit 3[\s\S]*the report could not be written"),
    ],
)
def test_an_ncu_that_hangs_or_exits_non_zero_fails_its_call_naming_it(tmp_path, monkeypatch, command, refused):
    from kernel_session import ends_soon

    monkeypatch.setattr(ncu_launch, "NCU_CALL_TIMEOUT_S", 1)
    calls = ncu_launch.ProfiledCalls(tmp_path, "outer", ncu="ncu", out=tmp_path)
    (tmp_path / "6-0.out").write_text("==ERROR== the report could not be written\n")
    process = subprocess.Popen(command)
    call = {"call": "6-0", "cell": RUN_6, "report": "r.ncu-rep"}
    with pytest.raises(ncu_launch.LaunchError, match=refused):
        calls.finished(call, process, tmp_path / "6-0.out", started=0.0)
    assert ends_soon(process.pid), "the hung ncu lives on after its time limit"


def test_a_child_works_in_the_kernels_folder_where_nsight_reads_what_the_child_writes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the harness's OUT_DIR, the kernel's working folder
    env = ncu_launch.child_env()
    assert env["NSPY_TUTORIAL_OUT"] == str(tmp_path) and env["NSPY_NCU_INIT_AT_IMPORT"] == "0", env


def test_the_child_program_starts_as_ncu_starts_it_from_any_folder(tmp_path):
    """ncu runs `python .../recording/ncu_inner.py`: only recording/ is on its path, plumbing must be found."""
    done = subprocess.run([sys.executable, ncu_launch.INNER, "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: "), done.stderr
