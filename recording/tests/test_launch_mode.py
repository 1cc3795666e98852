"""Launch mode on a CPU: the layer in a real kernel (PYTHONSTARTUP) with the runner's ncu faked, the wrapper's
refusals, and the inner's replay. Nothing imitates nsight: its real collect runs through the patches."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import fakes
import ncu_launch
import pytest
from kernel_session import CellError, KernelSession

from plumbing.cells import HARNESS, SECTION_ONE_CELLS, SECTION_PLAN, SETUP_HELPERS

WING = Path(__file__).resolve().parent.parent
ROOT = WING.parent
CELLS = {cell["id"]: cell["source"] for cell in ncu_launch.load_cells()}


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """A kernel in launch mode that ran section 1's decision, `import nsight`, and section 2's first profiled call."""
    tmp_path = tmp_path_factory.mktemp("launch")
    ncu = fakes.ncu(tmp_path / "bin", "2025.3.1", log=tmp_path / "ncu_args.json")  # the runner's, launch mode's
    env = dict(PYTHONSTARTUP=str(WING / "launch_startup.py"), NSPY_LAUNCH_WING=str(WING), NSPY_TUTORIAL_PROFILER="ncu")
    env |= dict(NSPY_TUTORIAL_LAUNCH_NCU=str(ncu), NSPY_TUTORIAL_OUT=str(tmp_path / "out"), MPLBACKEND="Agg")
    session = KernelSession(env, cwd=tmp_path)  # with what recording/run_launch_mode exports
    first = session.execute("print('a cell before section 1 helpers exist')")  # the layer must wait for them
    assert first.errors == [] and "Error in callback" not in first.stderr + first.stdout, first
    printed = {}
    section_one = [SECTION_ONE_CELLS[role] for role in ("choose", "import", "check", "magic")]  # no GPU, no pip here
    for cell_id in (HARNESS, SETUP_HELPERS, *section_one):
        printed[cell_id] = session.run(CELLS[cell_id], timeout=300)
    printed["decision"] = session.value("[USE_NCU, str(nsight.get_active_tool()), ENVIRONMENT.get('ncu_mode')]")
    for cell_id in (*SECTION_PLAN[2]["define"][:2], SECTION_PLAN[2]["run"][0], *SECTION_PLAN[6]["define"]):
        try:
            printed[cell_id] = session.run(CELLS[cell_id], timeout=300)
        except CellError as error:  # the run cell: no GPU here, so ncu wrote no report for nsight to read
            printed[cell_id] = error
    shutil.copy(tmp_path / "ncu_args.json", tmp_path / "ncu_args_2.json")
    with pytest.raises(CellError):  # a run cell under %%needs_ncu: its call is still section 6's
        session.run(CELLS[SECTION_PLAN[6]["run"][0]], timeout=300)
    yield types.SimpleNamespace(folder=tmp_path, ncu=ncu, printed=printed, session=session)
    session.close()


def test_section_1_decides_for_nsight_compute_in_launch_mode_with_nothing_loaded_in_the_kernel(launched):
    decision, active_tool, mode = launched.printed["decision"]
    assert decision is True and active_tool == "Tool.NCU", f"section 1 must use Nsight Compute: {decision, active_tool}"
    assert "launch" in mode, f"summary.json's environment must say launch mode: {mode}"
    said, ncu = launched.printed[SECTION_ONE_CELLS["choose"]], launched.ncu  # that ncu, first on PATH
    assert f"Nsight Compute at {ncu}, in launch mode" in said and f"Measuring with Nsight Compute: {ncu}" in said, said


def test_the_run_lists_the_t4s_metrics_for_every_base_the_notebook_asks_for(launched):
    header = (launched.folder / "out" / "tu104_metric_suffixes.txt").read_text().splitlines()[0]
    assert "--chip tu104" in header and "dram__bytes_read," in header and "gpu__time_duration" in header, header


def test_a_profiled_call_runs_in_a_child_under_ncu_with_nsights_flags_and_the_clocks_left_alone(launched):
    """The flags in full, attach mode's dropped: test_launch_command_passes_nsights_own_settings_to_ncu_..."""
    tmp_path, printed, run_cell = launched.folder, launched.printed, SECTION_PLAN[2]["run"][0]
    assert isinstance(printed[run_cell], CellError), f"no GPU, no report: the call must fail here: {printed}"
    argv = json.loads((tmp_path / "ncu_args_2.json").read_text())
    assert argv[0] == "--nvtx" and argv[argv.index("--clock-control") + 1] == "none", argv
    report = Path(argv[argv.index("-o") + 1])
    assert report.is_absolute() and report.parent == tmp_path / "out" / "s2_summed", "where the kernel reads it"
    assert argv[-6:-4] == [sys.executable, str(WING / "ncu_inner.py")] and argv[-2:] == ["--call", "2-0"], argv
    calls = json.loads((tmp_path / "out" / "ncu_launch_calls.json").read_text())
    six = SECTION_PLAN[6]["run"][0]
    assert [(call["call"], call["cell"], call["ncu_exit"]) for call in calls] == [("2-0", run_cell, 0), ("6-0", six, 0)]


def test_an_ncu_started_by_a_cell_without_clock_control_none_is_refused_in_the_kernel(launched):
    ncu = str(launched.ncu)
    with pytest.raises(CellError, match="without --clock-control none"):
        launched.session.run(f"import subprocess\nsubprocess.run([{ncu!r}, '-o', 'r', 'python3'])")
    said = launched.session.run(f"print(subprocess.run([{ncu!r}, '--version'], capture_output=True, text=True).stdout)")
    assert "2025.3.1" in said, "an ncu that profiles nothing is let through"


@pytest.mark.parametrize("version", ["2024.3.1", None, "hangs"])
def test_the_wrapper_refuses_an_ncu_too_old_missing_or_silent_before_anything_runs(tmp_path, version):
    ncu = fakes.ncu(tmp_path, version) if version and version[0].isdigit() else tmp_path / "no-ncu"
    if version == "hangs":  # an ncu that never answers --version is refused after 30 s, not waited on for ever
        ncu.write_text("#!/bin/sh\nsleep 1000\n")
        ncu.chmod(0o755)
    env = {**fakes.clean_environment(), "NSPY_TUTORIAL_LAUNCH_NCU": str(ncu), "HOME": str(tmp_path)}
    done = subprocess.run(
        [WING / "run_launch_mode", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 2 and "NSPY_TUTORIAL_LAUNCH_NCU" in done.stderr, done.stderr
    assert version != "hangs" or "did not answer --version within 30 s" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists(), "nothing may run or be written"


@pytest.mark.parametrize("section", [9, 10])  # the sections whose cells also start processes of their own
def test_the_inner_replays_the_harness_section_1s_names_the_shared_cells_and_its_sections_define_and_run_cells(section):
    cells = ncu_launch.load_cells()
    replayed, plan = ncu_launch.inner_cell_ids(cells, section), SECTION_PLAN[section]
    first = [SECTION_ONE_CELLS[role] for role in ncu_launch.SECTION_ONE_REPLAYED]
    assert replayed[:5] == [HARNESS, SETUP_HELPERS, *first], f"nsight, the magic and torch first: {replayed}"
    shared = [cell["id"] for cell in cells if ncu_launch.binds_at_top(cell["source"], ncu_launch.SHARED_NAMES)]
    assert shared and set(shared) <= set(replayed), f"the cells binding {ncu_launch.SHARED_NAMES}: {shared}"
    assert set(plan["define"]) <= set(replayed) and not set(ncu_launch.NOT_UNDER_NCU) & set(replayed), replayed
    sources = {cell["id"]: cell["source"] for cell in cells}
    own = [cell_id for cell_id in replayed if ncu_launch.section_of(cell_id) == section]
    starters = [cell_id for cell_id in own if re.search(r"subprocess|%pip", sources[cell_id])]
    assert not starters, f"a child under ncu must not install or start its own processes: {starters}"


@pytest.mark.parametrize("section", [2, 3, 5, 6, 7, 9, 10])  # 4 and 8 read the GPU in their define cells
def test_a_child_replays_its_section_up_to_its_call_and_runs_it_in_nsights_own_session(section, tmp_path, monkeypatch):
    """ncu_inner.main in this process, as ncu would start it, with torch faked (no GPU here) and nsight's session
    recorded instead of run: every cell before the call must run, and the call must be the section's first."""
    import importlib

    import ncu_inner
    from nsight import tools_manager
    from nsight.collection import core
    from nsight.collection import ncu as nsight_ncu

    for module_name, name in ncu_launch.PATCHED_FUNCTIONS:  # the child patches nsight for good: undone here
        module = importlib.import_module(module_name)
        monkeypatch.setattr(module, name, getattr(module, name))
    monkeypatch.setattr(tools_manager, "_active_tool", None)
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)  # this process has no ncu to load
    sessions = []

    def session(func, configs, runs, *_, **__):  # nsight's parameters, as ProfiledCalls passes them on
        sessions.append(func.__name__)

    monkeypatch.setattr(core, "run_profile_session", session)
    cuda = types.SimpleNamespace(get_device_name=lambda *_: "Tesla T4", synchronize=lambda: None)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.9.0", cuda=cuda))
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    monkeypatch.chdir(tmp_path)
    assert ncu_inner.main(["--work", str(tmp_path), "--call", f"{section}-0"]) == 0, "its cells failed or never called"
    assert len(sessions) == 1, f"the child must run exactly its own call: {sessions}"


def test_the_maintainers_command_runs_run_headless_with_the_layer_and_keeps_nothing_from_a_refused_run(tmp_path):
    """docs/maintainers.md's one line, verbatim, in a copy of the clone on a machine without a GPU: the wrapper hands
    over to scripts/run_headless with the layer's settings, which refuses; nothing is run or kept."""
    guide = (ROOT / "docs" / "maintainers.md").read_text().split("### Recording the Nsight Compute half", 1)[1]
    line = guide.split("```bash\n", 1)[1].split("\n```", 1)[0]
    assert "recording/run_launch_mode" in line and "tools/keep_run.py" in line, line
    clone = fakes.fresh_clone(tmp_path / "clone")
    shutil.copytree(WING, clone / "recording", ignore=shutil.ignore_patterns("__pycache__", "tests"))
    (clone / "docs" / "verified").mkdir(parents=True)
    (clone / "wheelhouse").mkdir()
    (clone / "wheelhouse" / "nsight_python-1.1.0-py3-none-any.whl").write_text("")  # made by make_wheelhouse.py
    env = fakes.script_machine(tmp_path, gpu=False)
    env["PATH"] = f"{fakes.ncu(tmp_path / 'ncu', '2025.3.1').parent}:{env['PATH']}"  # the runner's ncu
    done = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "run_headless: no NVIDIA GPU here" in done.stderr, f"{done.stdout}{done.stderr}"
    assert not list((clone / "docs" / "verified").iterdir()), "a refused run must keep nothing"
