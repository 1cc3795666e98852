"""recording/record_ncu.py, ncu_inner.py on CPU: the plan, the clock policy, and the plan replayed with a fake ncu."""

from __future__ import annotations

import importlib
import json
import lzma
import os
import pickle
import re
import subprocess
import sys
import types

import ncu_inner
import ncu_launch
import pandas as pd
import pytest
import record_ncu
import recordings
from fakes import ncu
from nsight.collection import ncu as nsight_ncu
from support import ROOT, RUN, ncu_namespace

from plumbing.cells import NOT_UNDER_NCU, SECTION_DEPENDENCY, SECTION_PLAN

COMMITTED = recordings.recording_folders()


def test_a_base_clock_call_runs_under_an_ncu_that_leaves_the_clocks_alone_and_notes_what_it_asked(patched):
    calls, log, _ = patched
    base = ncu_namespace(*SECTION_PLAN[4]["define"], SIZES=[1024])["base"]  # SIZES: what s4-sizes reads off the GPU
    with pytest.raises(nsight_ncu.exceptions.ProfilerException, match=NO_REPORT):  # the fake ncu writes none
        base()
    argv = json.loads(log.read_text())
    assert argv[argv.index("--clock-control") + 1] == "none", f"the shared runner's clocks must stay: {argv}"
    asked = {key: calls.calls[-1][key] for key in ("clock_control", "ncu_clock_control")}
    assert asked == {"clock_control": "base", "ncu_clock_control": "none"}, "the call must note both"


def test_plan_lists_every_section_that_profiles_and_the_metrics_without_a_gpu_and_what_section_10_reads(capsys):
    assert record_ncu.main(["--plan"]) == 0
    lines = (out := capsys.readouterr().out).splitlines()
    prelude = [f"section -: {cell_id} (prelude)" for cell_id in recordings.prelude_cell_ids(recordings.load_cells())]
    assert lines[: len(prelude)] == prelude, "the plan must start with the shared cells, before any section's"
    sections = {int(line.split(":")[0].split()[1]) for line in lines if re.match(r"section \d+:", line)}
    assert sections == set(SECTION_PLAN), f"the plan records sections {sorted(sections)}, not {sorted(SECTION_PLAN)}"
    assert f"section 2: {RUN[2]} (run, each profiled call under its own ncu)" in lines
    assert all(f": {cell_id} (run)\n" in out for cell_id in NOT_UNDER_NCU), "own-profiler cells run in the outer"
    metrics = record_ncu.notebook_metrics(recordings.load_cells())
    assert len(metrics) > 1 and all(m in lines[-1] for m in metrics), "the plan lists every metric the notebook names"
    assert record_ncu.main(["--plan", "--sections", "10"]) == 0
    alone = capsys.readouterr().out
    for number in SECTION_DEPENDENCY.get(10, ()):
        assert f"section {number}: read by [10], taken from the recording in docs/verified" in alone
    assert not re.findall(r"^section [2-9]: ", alone, re.M), "section 10 reads no other section: only its cells"


# ncu's version to its patch level: the recording's folder name, and launch mode's floor 2025.1.
@pytest.mark.parametrize(("given", "version"), [("folder", "2025.1.0"), ("file", "2025.3.1"), ("folder", "2025.0.9")])
def test_nspy_record_ncu_names_the_ncu_the_recorder_runs_its_folder_its_version_and_one_older_than_2025_1_is_refused(
    tmp_path, given, version
):
    fake = ncu(tmp_path, version)
    environ = {"NSPY_RECORD_NCU": str(tmp_path if given == "folder" else fake), "PATH": ""}
    assert record_ncu.ncu_executable(environ) == str(fake), "NSPY_RECORD_NCU (a folder: its ncu) is the ncu that runs"
    if version < "2025.1":
        with pytest.raises(recordings.RecorderError, match=f"needs ncu 2025.1 or newer.*{version}.*NSPY_RECORD_NCU"):
            record_ncu.launch_mode_ncu_version(str(fake))
    else:
        assert record_ncu.folder_name("NVIDIA H200", f"{version}.0") == f"nvidia-h200-ncu-{version}"
        assert record_ncu.launch_mode_ncu_version(str(fake))[0] == version


def test_the_recorder_ignores_ncu_path_the_notebooks_setting_and_runs_the_ncu_on_path(tmp_path):
    on_path = ncu(tmp_path / "bin", "2025.3.1")
    environ = {"NCU_PATH": str(tmp_path / "none"), "PATH": str(on_path.parent)}  # a learner's NCU_PATH, left set
    assert record_ncu.ncu_executable(environ) == str(on_path), "NCU_PATH is the notebook's: the recorder ignores it"


@pytest.mark.parametrize("value", ["{tmp}/none", "{tmp}", "{tmp}/old/ncu"])  # no file, a folder without ncu, too old
def test_a_bad_nspy_record_ncu_is_refused_before_anything_runs_naming_the_setting_and_writing_nothing(
    tmp_path, monkeypatch, capsys, value
):
    ncu(tmp_path / "old", "2024.3.2")
    for name, setting in (("NSPY_RECORD_NCU", value.format(tmp=tmp_path)), ("NSPY_RECORD_WORK", f"{tmp_path}/w")):
        monkeypatch.setenv(name, setting)
    monkeypatch.setenv("NSPY_NCU_INIT_AT_IMPORT", "0")  # main sets it for nsight; undone after the test
    monkeypatch.setattr(record_ncu, "require_gpu", lambda: pytest.fail("the GPU was looked for before the setting"))
    before = sorted(tmp_path.rglob("*"))
    assert record_ncu.main(["--dest", str(tmp_path / "dest"), "--sections", "2"]) == 2
    said = capsys.readouterr().err
    assert "NSPY_RECORD_NCU" in said and "set NSPY_RECORD_NCU to an ncu 2025.1 or newer" in said, said
    assert sorted(tmp_path.rglob("*")) == before, "a refused NSPY_RECORD_NCU must write nothing"


def test_the_outer_process_checks_nsights_internals_before_it_looks_for_ncu(monkeypatch, tmp_path):
    monkeypatch.setattr(record_ncu, "require_gpu", lambda: None)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace())
    monkeypatch.delattr(nsight_ncu, "begin_profiling")
    monkeypatch.setattr(record_ncu, "ncu_executable", lambda: pytest.fail("ncu was looked for before nsight's check"))
    with pytest.raises(recordings.RecorderError, match="begin_profiling is gone"):
        record_ncu.outer(tmp_path, [2])


def test_the_staleness_check_sees_the_settings_each_define_cell_binds_if_use_ncu_blocks_included():
    assert {"rates", "METRICS", "TRAFFIC", "summed", "COLLECTORS", "heated"} <= (
        recordings.benchmark_setting_names(recordings.load_cells())
    ), "the settings of sections 5 to 8 (their define cells bind them) must be compared"
    assert {"EVERY_CALL", "METRICS", "SIZES"} <= recordings.benchmark_setting_names(recordings.load_cells()), (
        "the settings of sections 2 and 4 (a gpu_define cell's too) must be compared"
    )


def test_an_inner_process_replays_only_the_shared_cells_and_its_own_sections_define_and_run_cells():
    cells = recordings.load_cells()
    shared = recordings.prelude_cell_ids(cells)
    for number in SECTION_PLAN:
        ids = [cell_id for _, cell_id, _ in ncu_launch.inner_plan(cells, number)]
        own = [c for c, role in recordings.section_steps(cells, number) if role not in ("analysis",)]
        assert ids == shared + [c for c in own if c not in NOT_UNDER_NCU], f"section {number}: {ids}"


# Queries (section 10's `ncu --import`) and the profiled calls' own ncu pass: the replays below run them.
@pytest.mark.parametrize("argv", [["ncu", "--clock-control", "base", "python3"], ["/opt/ncu", "python3", "x.py"]])
def test_an_ncu_command_line_without_clock_control_none_is_refused_before_it_starts(argv):
    with ncu_launch.NcuGuard("/opt/ncu") as guard, pytest.raises(recordings.RecorderError, match="--clock-control"):
        subprocess.run(argv)
    assert subprocess.Popen is guard.saved, "leave subprocess.Popen as it was"


# ---------------------------------------------------------------- the plan replayed on a CPU with a fake ncu
NO_REPORT = "No NVIDIA Nsight Compute report found"  # nsight's own extraction, after ncu ran: no GPU, no report


@pytest.fixture
def launch_mode(tmp_path, monkeypatch, ncu_work):
    """What the outer process has on the runner, without torch or a GPU."""
    work, report = ncu_work, tmp_path / "sections.ncu-rep"
    report.write_bytes(lzma.decompress(next((COMMITTED[0] / "s10_sections").glob("*.ncu-rep.xz")).read_bytes()))
    fake = ncu(tmp_path, "2025.3.1", log=tmp_path / "ncu_args.json", report=report)  # the runner's version
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")  # as outer() puts its ncu first on PATH
    facts = {**recordings.load_recording(COMMITTED[0])["environment"], "ncu_path": str(fake)}
    real = ncu_launch.section_one_names  # with the recording's facts: this machine has no torch
    monkeypatch.setattr(ncu_launch, "section_one_names", lambda namespace: real(namespace, facts))

    def replay(steps, recorded=None):
        calls = ncu_launch.ProfiledCalls(work, "outer", ncu=str(fake), log=lambda *_: None)
        try:
            with ncu_launch.NcuGuard(str(fake)) as guard:
                return ncu_launch.replay(steps, calls, guard, log=lambda *_: None, recorded=recorded), calls, guard
        finally:
            calls.uninstall()

    return work, replay


def test_section_10s_own_ncu_runs_in_the_outer_with_clock_none_and_its_rules_are_read_from_that_report(launch_mode):
    """--sections 10 reads no other section; its Going further runs ncu with sections itself (through the guard), and
    the cells after it read the rules and stall reasons of the report that ncu wrote (here: a recorded one)."""
    work, replay = launch_mode
    assert record_ncu.needed_reports([10], work / "no recordings", work) is None, "section 10 reads no other section"
    own = ("s10-define", "s10-profile", "s10-rules", "s10-rules-verdict")  # not s10-run: its call needs a GPU
    steps = [step for step in recordings.plan(recordings.load_cells(), [10]) if step[0] is None or step[1] in own]
    assert [step[1] for step in steps if step[0] == 10] == list(own), "the plan's section 10 lost a cell this reads"
    done, calls, guard = replay(steps)
    failures = {cell: run["output"][-1500:] for cell, run in done["runs"].items() if run.get("failed")}
    assert not failures, f"cells failed under the recorder's outer process: {failures}"
    assert calls.calls == [] and len(guard.runs) == 1, "one ncu of section 10's own, no nsight-python call"
    assert "--clock-control none" in guard.runs[0], guard.runs[0]
    assert "--kernel-name regex:softmax --launch-skip 1 --launch-count 1" in guard.runs[0], guard.runs[0]
    assert done["ncu_runs"] == {10: 1}, "section 10's ncu process is counted as its cost"
    printed = done["runs"]["s10-rules"]["output"]
    throughputs = re.search(r"^compute (\d+)%, memory (\d+)% of peak$", printed, re.MULTILINE)
    assert throughputs, f"the throughputs: {printed}"
    fired = "SpeedOfLight: Latency Issue" in printed  # the rule: compute and memory both under 60% of peak
    assert fired == all(int(pct) < 60 for pct in throughputs.groups()), f"the report's rules, as read: {printed}"
    namespace = done["namespace"]
    stalls = namespace["stalls"]
    assert "selected" not in stalls.index and stalls.max() > 1, f"stall reasons without 'selected': {stalls}"
    headline = namespace["SECTIONS"][10]["headline"]
    assert headline.endswith(f"Latency Issue fired: {fired}"), f"the verdict must follow the rules read: {headline}"


def test_the_whole_plan_runs_on_a_cpu_up_to_each_sections_first_profiled_call_or_gpu_only_step(launch_mode):
    """Every section gets as far as its first profiled call through nsight's real collect (then finds no report),
    or for 4, 8 and 9 the first cell that needs the GPU machine: a NameError before that would wait for the runner."""
    work, replay = launch_mode
    done, calls, _ = replay(recordings.plan(recordings.load_cells(), record_ncu.SECTIONS))
    last = {cell: run["output"].strip().splitlines()[-1] for cell, run in done["runs"].items() if run.get("failed")}
    gpu_only = {4: "'NoneType' object has no attribute 'cuda'", 8: "No module named 'pynvml'|NVML", 9: "libcupti"}
    for number in record_ncu.SECTIONS:
        failed = done["failed"].get(number)
        if number in SECTION_DEPENDENCY:
            assert failed and "which it reads" in failed, f"section {number} must stop with the section it reads"
        elif not (number in gpu_only and failed in last and re.search(gpu_only[number], last[failed])):
            first = next((call for call in calls.calls if call["section"] == number), None)
            assert first and failed == first["cell"], f"section {number} stopped in {failed}: {last.get(failed)}"
            assert NO_REPORT in last[failed], f"section {number}'s first call failed otherwise: {last[failed]}"
            assert "--clock-control none" in first["command"], first["command"]
    assert done["failed"].keys() == set(record_ncu.SECTIONS), f"a section ended ok without a GPU: {done['failed']}"
    assert set(done["ncu_runs"]) <= {10}, "a profiled call's ncu is counted with its call, not as a section's own"


def test_the_inner_process_serves_earlier_calls_so_nsight_rebuilds_the_recorded_frame(ncu_work):
    """Under ncu, every call before the inner's own is answered with the raw frame the outer extracted."""
    recording = recordings.load_recording(COMMITTED[0])
    call = next(call for call in recording["calls"] if call["section"] == 6)
    (ncu_work / "calls" / "6-0.pkl").write_bytes(pickle.dumps(("frame", recordings.decode(call["raw_frame"]))))
    namespace = ncu_namespace(*SECTION_PLAN[6]["define"])
    calls = ncu_launch.ProfiledCalls(ncu_work, "inner", target="6-1", log=lambda *_: None)
    calls.install()
    calls.where = (6, RUN[6])
    try:
        rebuilt = namespace["three_kernels"]().to_dataframe()
    finally:
        calls.uninstall()
    pd.testing.assert_frame_equal(rebuilt, recording["variables"]["bound_frame"])


@pytest.mark.parametrize(("call", "exit_status", "ran"), [("6-0", 0, 1), ("6-1", 3, 0)])  # 6 makes one call
def test_ncu_inner_runs_its_call_with_nsights_own_session_and_exits_0_or_3_if_its_cells_never_reach_it(
    launch_mode, monkeypatch, call, exit_status, ran
):
    """The command the outer gives ncu, run as ncu would; a non-zero exit fails the call in the outer."""
    work, _ = launch_mode
    from nsight.collection import core

    sessions = []
    monkeypatch.setattr(core, "run_profile_session", lambda func, configs, runs, *_, **__: sessions.append(func))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=list)))
    for module_name, name, _ in ncu_launch.PATCHED_FUNCTIONS:  # undone after the test: the inner never unpatches
        module = importlib.import_module(module_name)
        monkeypatch.setattr(module, name, getattr(module, name))
    served = next(c for c in recordings.load_recording(COMMITTED[0])["calls"] if c["section"] == 6)
    (work / "calls" / "6-0.pkl").write_bytes(pickle.dumps(("frame", recordings.decode(served["raw_frame"]))))
    command = ncu_launch.inner_program(work, call)
    assert command[:2] == [sys.executable, str(ROOT / "recording" / "ncu_inner.py")], command
    assert ncu_inner.main(command[2:]) == exit_status, "the inner exits 0 only after its own call, else 3"
    assert len(sessions) == ran, f"the inner ran {sessions}: exactly its own call"


def test_the_recorder_exits_2_when_a_section_failed_though_it_wrote_the_others(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NSPY_RECORD_WORK", str(tmp_path / "w"))
    monkeypatch.setenv("NSPY_NCU_INIT_AT_IMPORT", "0")
    monkeypatch.setattr(record_ncu, "outer", lambda dest, sections: (tmp_path, {8: RUN[8]} if 8 in sections else {}))
    assert record_ncu.main(["--dest", str(tmp_path)]) == 2 and RUN[8] in capsys.readouterr().err
    assert record_ncu.main(["--dest", str(tmp_path), "--sections", "2"]) == 0, "exit 0 when every section is ok"
