"""Section 1 as a sequence: its real cells, run in order in a real kernel on simulated machines.

Only what needs the cells in sequence is here: Colab as it is, after a runtime restart and on a second Run all,
the CUPTI branch, NSPY_TUTORIAL_PROFILER=ncu stopping, and no GPU. Each decision a helper makes on its own (which
ncu, which apt versions, time limits, pins, settings) is tested as a function in test_setup_helpers.py. Each
scenario builds a FakeMachine (tests/fake_env.py: nvidia-smi, ncu launchers, apt-get, dpkg and pip as small
executables) and runs the notebook's own section 1 cells against the real nsight-python.

Where a GPU is really needed the run stops, and each test says where: nsight's own check of the
Nsight Compute injection library, `import torch`, or loading libcupti.so.13.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from fake_env import COLAB_SITE, FakeMachine, clean_environment
from kernel_session import CellError, KernelSession
from support import NOTEBOOK, cell_by_id, section_code_cells

from plumbing.cells import GPU_CHECK, HARNESS, SECTION_ONE_CELLS, SETUP_HELPERS

NB = nbformat.read(NOTEBOOK, as_version=4)
APT, NCU, PIP, PROBE, IMPORT = (SECTION_ONE_CELLS[role] for role in ("apt", "ncu", "pip", "probe", "import"))
_SECTION_1_ALL = [cell.id for cell in section_code_cells(NB, 1)]  # section 1's code cells, in notebook order
SECTION_1 = _SECTION_1_ALL[: _SECTION_1_ALL.index(IMPORT) + 1]  # up to the import cell: after it, a GPU is needed
RERUN = SECTION_1[SECTION_1.index(SETUP_HELPERS) + 1 :]  # a second Run all re-executes these in the same kernel
HAVE_CC = bool(shutil.which("cc") or shutil.which("gcc"))  # to build a loadable fake injection library


class MachineKernel(KernelSession):
    """A kernel whose environment is exactly the simulated machine's (no settings leak in from outside)."""

    def __init__(self, env: dict[str, str], cwd: Path):
        super().__init__(env, cwd, base_env=clean_environment())


@dataclass
class Run:
    machine: FakeMachine
    kernel: MachineKernel
    outputs: dict[str, str] = field(default_factory=dict)
    stopped_at: str | None = None
    error: CellError | None = None

    def text(self) -> str:
        return "\n".join(self.outputs.values()) + (f"\n{self.error.ename}: {self.error.evalue}" if self.error else "")

    def value(self, expression: str):
        return self.kernel.value(expression)


def run_cells(run: Run, cells: list[str], before: dict[str, str] | None = None) -> Run:
    """Run cells by id until one raises; `before` holds code to run right before a given cell."""
    run.stopped_at, run.error = None, None
    for cell_id in cells:
        if before and cell_id in before:
            run.kernel.run("# @title test set-up\n" + before[cell_id])
        try:
            run.outputs[cell_id] = run.kernel.run(cell_by_id(NB, cell_id).source, timeout=300)
        except CellError as error:
            run.outputs[cell_id] = error.stdout
            run.stopped_at, run.error = cell_id, error
            break
    return run


def start(tmp_path_factory, name: str, **machine_options) -> Run:
    machine = FakeMachine(tmp_path_factory.mktemp(name), **machine_options)
    env = machine.build()
    return Run(machine, MachineKernel(env, machine.root / "cwd"))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """Start scenarios on demand; every kernel is shut down at the end of the module."""
    started: list[Run] = []

    def begin(name: str, cells=SECTION_1, before=None, **machine_options) -> Run:
        run = start(tmp_path_factory, name, **machine_options)
        started.append(run)
        return run_cells(run, cells, before)

    yield begin
    for run in started:
        run.kernel.close()


def pip_targets(machine: FakeMachine) -> list[tuple[str, set[str]]]:
    """(target folder, requirements) of every pip call; the folder is '' when pip had no --target."""
    calls = []
    for call in machine.calls("pip"):
        argv = call["argv"]
        target = argv[argv.index("--target") + 1] if "--target" in argv else ""
        calls.append((target, {arg for arg in argv if "==" in arg}))
    return calls


def stops_where_a_gpu_is_needed(run: Run) -> None:
    """On these machines the CUPTI branch stops at the fake libcupti.so.13: a real one needs the CUPTI wheels."""
    assert run.stopped_at == IMPORT, f"stopped at {run.stopped_at}: {run.error}\n{run.text()[-3000:]}"
    assert run.error.ename == "OSError" and "libcupti.so.13" in run.error.evalue, run.error
    # The preload comes first: nothing that could load another libcupti has been imported yet.
    assert run.value("[m for m in ('nsight', 'cupti', 'torch') if m in sys.modules]") == []


# ---------------------------------------------------------------- Colab as it is, and a second Run all
@pytest.fixture(scope="module")
def colab(scenario):
    run = scenario("colab", injection="loadable" if HAVE_CC else "missing")
    first = {tool: len(run.machine.calls(tool)) for tool in ("apt-get", "pip")}
    first_output = run.text()
    run_cells(run, RERUN)
    return run, first, first_output


def test_colab_installs_the_newest_current_ncu_with_apt_noninteractively(colab):
    run, _, output = colab
    assert run.machine.apt_installs()[0] == "nsight-compute-2026.3.1", "apt must try the newest package first"
    assert run.machine.apt_installs() == ["nsight-compute-2026.3.1"], "after a success apt must stop"
    assert all(call["DEBIAN_FRONTEND"] == "noninteractive" for call in run.machine.calls("apt-get"))
    installs = [call["argv"] for call in run.machine.calls("apt-get") if call["argv"][0] == "install"]
    assert all("-y" in argv for argv in installs), f"without a terminal apt-get aborts unless told yes: {installs}"
    assert "installing nsight-compute-2026.3.1 with apt-get" in output


def test_colab_puts_the_new_ncu_first_on_path_for_nsight(colab):
    run, _, output = colab
    launcher = run.machine.root / "opt/nvidia/nsight-compute/2026.3.1/ncu"
    assert run.value("shutil.which('ncu')") == str(launcher), "nsight would find Colab's old ncu"
    assert run.value("os.environ['PATH'].split(os.pathsep)[0]") == str(launcher.parent)
    assert f"ncu first on PATH: {launcher} (Nsight Compute 2026.3.1)" in output


def test_colab_installs_only_into_the_tutorials_folders(colab):
    run, _, output = colab
    home = run.machine.root / "home/.cache/nspy_tutorial"
    calls = pip_targets(run.machine)
    assert all(target for target, _ in calls), f"pip was asked to change this Python's own packages: {calls}"
    with_dependencies = [call["argv"] for call in run.machine.calls("pip") if "--no-deps" not in call["argv"]]
    assert not with_dependencies, f"dependencies would shadow Colab's numpy and pandas: {with_dependencies}"
    assert calls[0] == (str(home / "packages"), {"cuda-core==1.2.2", "nvidia-ml-py==13.610.43"}), calls
    cupti_set = {"cupti-python==13.4.0", "nvidia-cuda-cupti==13.5.25", "pyelftools==0.33", "cuda-bindings==13.3.1"}
    assert calls[1] == (str(home / "cupti13"), cupti_set), "Colab's cuda-bindings is 12.x: the CUPTI set needs 13"
    assert f"installing cuda-core==1.2.2 nvidia-ml-py==13.610.43 into {home / 'packages'}" in output, output


def test_colab_probe_profiles_for_real_and_the_fallback_names_its_cause(colab):
    run, _, output = colab
    assert (run.machine.root / "out/ncu_probe.log").exists(), "a current ncu was found, so the probe must run"
    if HAVE_CC:  # nsight loaded the (fake) injection library; the probe stops at the first GPU step
        assert "the probe failed at 'import torch'" in output
    else:
        assert "the probe failed at 'import nsight'" in output
    assert "backend: CUPTI, because the probe failed" in output
    assert run.value("USE_NCU") is False


def test_colab_second_run_all_installs_nothing_again(colab):
    run, first, _ = colab
    assert run.error is not None and run.stopped_at == IMPORT  # the second pass stops where the first did
    assert len(run.machine.calls("apt-get")) == first["apt-get"], "a second Run all ran apt-get again"
    assert len(run.machine.calls("pip")) == first["pip"], f"a second Run all reinstalled: {pip_targets(run.machine)}"
    # Colab's own cuda-bindings is 12.x, so the CUPTI set keeps its cuda-bindings 13, even though the CUPTI
    # folder (with 13.3.1) is now on sys.path: the decision reads Colab's packages, not the tutorial's.
    assert run.value("cupti_set").get("cuda-bindings") == "13.3.1"
    path = run.value("os.environ['PATH'].split(os.pathsep)")
    assert path.count(path[0]) == 1 and path[0].endswith("nsight-compute/2026.3.1")
    assert run.outputs[APT] == "", "the package is installed: the apt cell must do nothing"
    assert "(Nsight Compute 2026.3.1)" in run.outputs[NCU]


def test_colab_after_a_runtime_restart_finds_the_apt_install_through_dpkg(colab):
    """A restart resets PATH, but the package is still installed: dpkg names it and apt-get stays idle."""
    run, _, _ = colab
    apt_calls = len(run.machine.calls("apt-get"))
    pip_calls = len(run.machine.calls("pip"))
    restarted = Run(run.machine, MachineKernel(run.machine.build_env(), run.machine.root / "cwd"))
    try:
        run_cells(restarted, SECTION_1)
        assert restarted.outputs[APT] == "", "dpkg lists the package: apt-get must not run again"
        assert len(run.machine.calls("apt-get")) == apt_calls and len(run.machine.calls("pip")) == pip_calls
        assert restarted.value("shutil.which('ncu')").endswith("nsight-compute/2026.3.1/ncu")
    finally:
        restarted.kernel.close()


def test_colab_stops_only_where_a_gpu_is_needed(colab):
    run, _, _ = colab
    stops_where_a_gpu_is_needed(run)


def test_nothing_is_written_outside_the_output_and_install_folders(colab):
    run, _, _ = colab
    root = run.machine.root
    assert list((root / "cwd").iterdir()) == [], "the notebook wrote into the working directory"
    ours = {p.relative_to(root / "home").parts[:2] for p in (root / "home").rglob("*") if p.is_file()}
    tools_own = {(".cache", "matplotlib")}  # IPython's history and matplotlib's font cache are not the notebook's
    unexpected = {p for p in ours if p[0] != ".ipython" and p not in tools_own and p != (".cache", "nspy_tutorial")}
    assert not unexpected, f"written outside OUT_DIR and ~/.cache/nspy_tutorial: {unexpected}"
    written = {p.name for p in (root / "out").iterdir()}
    logs = {"apt.log", "ncu_probe.log", "pip.log"}
    assert logs <= written <= logs | {"s1_probe"}, f"unexpected files in OUT_DIR: {written - logs}"


# ---------------------------------------------------------------- NSPY_TUTORIAL_PROFILER
def test_profiler_cupti_skips_ncu_entirely(scenario):
    run = scenario("choice_cupti", env={"NSPY_TUTORIAL_PROFILER": "cupti"})
    assert run.machine.calls("apt-get") == [], "with NSPY_TUTORIAL_PROFILER=cupti apt-get must not run"
    assert not (run.machine.root / "out/ncu_probe.log").exists()
    assert "NSPY_TUTORIAL_PROFILER=cupti" in run.value("CUPTI_REASON")
    stops_where_a_gpu_is_needed(run)


def test_profiler_ncu_without_a_usable_ncu_stops_with_the_cause(scenario):
    run = scenario("choice_ncu_no_ncu", apt="unreachable", env={"NSPY_TUTORIAL_PROFILER": "ncu"})
    assert run.stopped_at == NCU and run.error.ename == "RuntimeError"
    assert "NSPY_TUTORIAL_PROFILER=ncu, but there is no ncu 2026.2.1+" in run.error.evalue
    assert "apt-get update failed" in run.error.evalue
    assert run.machine.calls("pip") == [], "nothing is installed for a profiler that cannot be had"


# ---------------------------------------------------------------- the import cell, after a probe that said yes
@pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler to build a loadable fake injection library")
def test_leftover_init_at_import_zero_is_cleared_in_the_ncu_branch(scenario):
    """A user's NSPY_NCU_INIT_AT_IMPORT=0 must not keep Nsight Compute from loading once the probe said yes.

    The probe cannot pass without a GPU, so a stand-in probe says yes; section 1's own choose_backend then
    decides, and the import cell must load Nsight Compute; the cell then stops at `import torch`.
    """
    run = scenario(
        "init_at_import_zero",
        path_ncus=["2026.3.1"],
        injection="loadable",
        env={"NSPY_NCU_INIT_AT_IMPORT": "0"},
        before={PROBE: "probe_ncu = lambda *args: (True, '')  # a probe that profiled on a GPU"},
    )
    assert run.stopped_at == IMPORT
    assert run.error.ename == "ModuleNotFoundError" and "torch" in run.error.evalue, run.error
    assert run.value("str(nsight.get_active_tool())") == "Tool.NCU"
    assert run.value("'NSPY_NCU_INIT_AT_IMPORT' in os.environ") is False


# ---------------------------------------------------------------- the GPU check
@pytest.mark.parametrize(
    ("gpu", "message"),
    [(None, "Runtime > Change runtime type > T4 GPU"), ("Tesla K80, 3.7", "compute capability 3.7")],
)
def test_no_usable_gpu_stops_at_the_first_cell_before_any_install(scenario, gpu, message):
    run = scenario(f"gpu_{gpu}".replace(" ", "_").replace(",", ""), gpu=gpu)
    assert run.stopped_at == GPU_CHECK and run.error.ename == "RuntimeError"
    assert message in run.error.evalue
    assert run.machine.calls("apt-get") == [] and run.machine.calls("pip") == []
    assert not (run.machine.root / "out").exists()


def test_a_t4_passes_the_gpu_check(colab):
    run, _, _ = colab
    assert "GPU 0: Tesla T4, compute capability 7.5" in run.outputs[GPU_CHECK]


def test_the_cupti_branch_keeps_nsight_compute_out_and_activates_cupti_with_nsights_tool(notebook, tmp_path):
    """The import cell's CUPTI branch, with the real nsight and no cupti-python (this suite's environment): nsight
    is imported with Nsight Compute kept out (no injection load was even tried), then activated with its own
    Tool enum, which asks for cupti-python. Only the libcupti preload stands in: there is no GPU library here."""
    session = KernelSession(env={"NSPY_TUTORIAL_OUT": str(tmp_path / "out")}, cwd=tmp_path)
    try:
        session.run(cell_by_id(notebook, HARNESS).source)
        session.run(cell_by_id(notebook, SETUP_HELPERS).source)
        session.run(
            "# @title test set-up: what the probe decided, and a stand-in for the libcupti preload\n"
            "CUPTI_PACKAGES_DIR = Path('cupti13')\n"
            "USE_NCU, CUPTI_REASON = choose_backend(None, 'no ncu here', 'auto')  # section 1's own decision\n"
            "preload_libcupti = lambda folder: folder / 'libcupti.so.13'\n"
        )
        with pytest.raises(CellError) as raised:
            session.run(cell_by_id(notebook, IMPORT).source)
        assert raised.value.ename == "ImportError" and "cupti-python is required" in raised.value.evalue
        assert session.value("nsight.collection.ncu.injection_load_error is None"), "nsight tried to load ncu"
        assert session.value("'torch' in sys.modules") is False, "torch must come after the backend is chosen"
    finally:
        session.close()


def test_a_second_run_all_installs_nsight_python_once_and_imports_it_from_the_tutorials_folder(scenario):
    # This Python has an older nsight-python, so the first Run all installs 1.1.0 into the tutorial's folder.
    run = scenario("second_run_all_source", site={**COLAB_SITE, "nsight-python": "1.0.0"})
    folder = run.value("str(PACKAGES_DIR)")
    assert "installing nsight-python==1.1.0" in run.outputs[PIP], run.outputs[PIP]
    run_cells(run, RERUN)  # Run all again: nothing to install now, still the same folder
    assert f"{folder} holds the pins already" in run.outputs[PIP], run.outputs[PIP]
    where = run.value("str(importlib.metadata.distribution('nsight-python').locate_file(''))")
    assert where.startswith(folder), f"nsight-python imports from {where}, not the tutorial's {folder}"
