"""Section 1's Nsight Compute probe (plumbing/ncu_probe.py) as a program under test, and the decision section 1 takes
from its answer file, probe.json (setup_helpers.probe_ncu): Nsight Compute only when the probe profiled a kernel,
with the chosen ncu, and measured a real time."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from fake_env import FakeMachine, build_fake_injection_library
from support import ROOT

from plumbing import setup_helpers
from plumbing.ncu_probe import check_kernel_times

PROBE = ROOT / "plumbing" / "ncu_probe.py"


@pytest.mark.parametrize("times", [[0.0], [math.nan], [], [math.inf], [-3.0], [812.0, 0.0]])
def test_a_kernel_time_of_zero_nan_or_none_is_refused(times):
    """Nsight Compute that attached but measured nothing must not be chosen: every later section would fail."""
    with pytest.raises(RuntimeError, match=r"the probe kernel measured \["):
        check_kernel_times(times)


def test_a_real_kernel_time_is_accepted():
    assert check_kernel_times([812.0]) == [812.0]


def probe_line(tmp_path, env) -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run(
        [sys.executable, str(PROBE), f"{tmp_path}/probe/"], env=env, capture_output=True, text=True, timeout=120
    )
    answer = tmp_path / "probe" / "probe.json"
    assert answer.is_file(), f"the probe must write probe.json in its folder; it printed:\n{done.stdout}\n{done.stderr}"
    return json.loads(answer.read_text()), done


def machine_env(tmp_path, **options) -> dict:
    from fake_env import clean_environment

    machine = FakeMachine(tmp_path / "machine", path_ncus=["2026.3.1"], **options)
    env = clean_environment()
    env["PATH"] = machine.build()["PATH"]
    return env


def test_the_probe_on_a_machine_whose_ncu_injection_is_missing_stops_at_import_nsight(tmp_path):
    report, done = probe_line(tmp_path, machine_env(tmp_path, injection="missing"))
    assert done.returncode == 0, "the probe reports in probe.json; it does not fail as a process"
    assert report["stage"] == "import nsight" and report["error"], report
    assert report["ncu"] == str(tmp_path / "machine" / "path-ncu-2026.3.1" / "ncu"), "the line names the ncu it saw"
    assert [path.name for path in (tmp_path / "probe").iterdir()] == ["probe.json"], "nothing was profiled"


def test_the_probe_past_a_loadable_injection_stops_at_the_first_step_that_needs_a_gpu(tmp_path):
    if build_fake_injection_library(tmp_path / "cc-check") is None:
        pytest.skip("no C compiler here to build a loadable injection library (.ci/run's image has one)")
    report, _ = probe_line(tmp_path, machine_env(tmp_path, injection="loadable"))
    assert report["stage"] in ("import torch", "profile one kernel") and report["error"], report
    assert report["stage"] != "done", "on a machine without a GPU the probe must never report success"


def reporting_probe(report: dict) -> str:
    """A probe program that writes `report` as its answer (what the real probe writes at the end)."""
    writes = f"pathlib.Path(sys.argv[1], 'probe.json').write_text(json.dumps({report!r}))"
    return f"import json, pathlib, sys\nprint('a warning first')\n{writes}\n"


def test_a_probe_that_profiled_with_another_ncu_is_not_trusted(tmp_path):
    chosen, other = tmp_path / "chosen" / "ncu", tmp_path / "other" / "ncu"
    for ncu in (chosen, other):
        ncu.parent.mkdir()
        ncu.write_text("")
    done = {"ncu": str(other), "stage": "done", "error": ""}
    usable, reason = setup_helpers.probe_ncu(chosen, f"{tmp_path}/", tmp_path / "probe.log", reporting_probe(done))
    assert not usable and f"used ncu at {other}, not the chosen {chosen}" in reason, reason
    usable, reason = setup_helpers.probe_ncu(
        chosen, f"{tmp_path}/", tmp_path / "probe.log", reporting_probe({**done, "ncu": str(chosen)})
    )
    assert (usable, reason) == (True, ""), "a probe that profiled with the chosen ncu commits to Nsight Compute"


def test_a_probe_whose_kernel_measured_zero_falls_back_naming_the_measurement(tmp_path):
    ncu = tmp_path / "ncu"
    ncu.write_text("")
    report = {"ncu": str(ncu), "stage": "profile one kernel", "error": "RuntimeError: the probe kernel measured [0.0]"}
    usable, reason = setup_helpers.probe_ncu(ncu, f"{tmp_path}/", tmp_path / "probe.log", reporting_probe(report))
    assert not usable and "failed at 'profile one kernel'" in reason and "measured [0.0]" in reason, reason


def test_a_probe_that_died_without_its_line_names_its_exit_status_and_log(tmp_path):
    usable, reason = setup_helpers.probe_ncu(
        tmp_path / "ncu", f"{tmp_path}/", tmp_path / "probe.log", "import os\nos._exit(7)"
    )
    assert not usable and "exit 7" in reason and str(tmp_path / "probe.log") in reason, reason
    assert Path(tmp_path / "probe.log").read_text().startswith("$ "), "the log starts with the command that ran"
