"""Section 1's own cells run in order, as Run all runs them, in real kernels on simulated machines (tests/fake_env.py)
against the real nsight-python: Colab as it is, a second Run all, a runtime restart, the CUPTI branch, no GPU, and
settings that stop the run. Where a GPU is really needed the run stops: at loading libcupti.so.13 or `import torch`.
"""

from __future__ import annotations

import shutil

import pytest
from fake_env import COLAB_SITE, FakeMachine, clean_environment
from kernel_session import CellError, KernelSession
from notebook_ast import code_cells
from support import cell_by_id

from plumbing.cells import GPU_CHECK, HARNESS, SECTION_ONE_CELLS, SETUP_HELPERS
from plumbing.setup_helpers import PINS

APT, NCU, PIP, PROBE, IMPORT = (SECTION_ONE_CELLS[role] for role in ("apt", "ncu", "pip", "probe", "import"))
HAVE_CC = bool(shutil.which("cc") or shutil.which("gcc"))  # to build a loadable fake injection library
GONE = "[m for m in ('nsight', 'cupti', 'torch') if m in sys.modules]"


class Run:
    """A kernel on a simulated machine that runs the notebook's cells by id until one raises."""

    def __init__(self, notebook, machine: FakeMachine, env: dict[str, str]):
        self.notebook, self.machine, self.env, self.outputs = notebook, machine, env, {}
        self.kernel = KernelSession(env, machine.root / "cwd", base_env=clean_environment())
        self.all = [cell.id for cell in code_cells(notebook)]
        self.section_1 = self.all[: self.all.index(IMPORT) + 1]

    def cells(self, ids, before: dict[str, str] | None = None) -> Run:
        self.stopped_at = self.error = None
        for cell_id in ids:
            if before and cell_id in before:
                self.kernel.run("# @title test set-up\n" + before[cell_id])
            try:
                self.outputs[cell_id] = self.kernel.run(cell_by_id(self.notebook, cell_id).source, timeout=300)
            except CellError as error:
                self.outputs[cell_id], self.stopped_at, self.error = error.stdout, cell_id, error
                break
        return self

    def value(self, expression: str):
        return self.kernel.value(expression)


@pytest.fixture(scope="module")
def start(notebook, tmp_path_factory):
    started = []

    def begin(name: str, kernel_env: dict | None = None, machine: FakeMachine | None = None, **options) -> Run:
        machine = machine or FakeMachine(tmp_path_factory.mktemp(name), **options)
        started.append(Run(notebook, machine, kernel_env or machine.build()))
        return started[-1]

    yield begin
    for run in started:
        run.kernel.close()


def pip_calls(machine: FakeMachine) -> list[tuple[str, set[str]]]:
    """(folder, names) of every pip call: its --target and the names it installs."""
    argvs = [call["argv"] for call in machine.calls("pip")]
    assert all("--no-deps" in argv and "--target" in argv for argv in argvs), f"Colab's packages touched: {argvs}"
    return [(argv[argv.index("--target") + 1], {a.split("==")[0] for a in argv if "==" in a}) for argv in argvs]


def assert_stopped_where_a_gpu_is_needed(run: Run) -> None:
    assert run.stopped_at == IMPORT and "libcupti.so.13" in run.error.evalue, f"{run.stopped_at}: {run.error}"
    assert run.value(GONE) == [], "the libcupti preload must come before nsight, cupti and torch"


# ---------------------------------------------------------------- Colab, a second Run all, a restart
@pytest.fixture(scope="module")
def colab(start):
    """Colab: an old ncu on PATH, apt reaches NVIDIA, nsight-python older than the pin; Run all, then again."""
    site = {**COLAB_SITE, "nsight-python": "1.0.0"}
    run = start("colab", site=site, injection="loadable" if HAVE_CC else "missing")
    run.cells(run.section_1)
    first = {"outputs": dict(run.outputs), "path": run.value("shutil.which('ncu')")}
    first |= {tool: len(run.machine.calls(tool)) for tool in ("apt-get", "pip")}
    assert_stopped_where_a_gpu_is_needed(run)
    run.cells(run.section_1[run.section_1.index(SETUP_HELPERS) + 1 :])  # Run all again, in the same kernel
    return run, first


def test_colab_passes_the_gpu_check_and_installs_the_ncu_with_apt_noninteractively_first_on_path(colab):
    run, first = colab
    assert "Tesla T4" in first["outputs"][GPU_CHECK]
    assert run.machine.apt_installs() == ["nsight-compute-2026.3.1"], "one apt-get install, of Nsight Compute"
    assert {call["DEBIAN_FRONTEND"] for call in run.machine.calls("apt-get")} == {"noninteractive"}
    assert first["path"] == str(run.machine.root / "opt/nvidia/nsight-compute/2026.3.1/ncu"), "not Colab's old ncu"


def test_colab_installs_only_what_it_lacks_into_the_tutorials_folders(colab):
    run, _ = colab
    home = run.machine.root / "home/.cache/nspy_tutorial"
    missing = {"nsight-python", "cuda-core", "nvidia-ml-py"}  # Colab's are older, or absent; never torch
    cupti = {"cupti-python", "nvidia-cuda-cupti", "pyelftools", "cuda-bindings"}  # Colab's cuda-bindings is 12
    assert pip_calls(run.machine) == [(str(home / "packages"), missing), (str(home / "cupti13"), cupti)]
    assert missing <= set(PINS), "the test's names must be pins"
    where = run.value("str(importlib.metadata.distribution('nsight-python').locate_file(''))")
    assert where == str(home / "packages"), f"nsight-python imports from {where}, not the tutorial's folder"


def test_colab_probes_nsight_compute_and_falls_back_to_cupti_naming_the_cause(colab):
    run, first = colab
    stage = "import torch" if HAVE_CC else "import nsight"  # with the fake injection, nsight loads it
    assert f"backend: CUPTI, because the probe failed at '{stage}'" in first["outputs"][PROBE], first["outputs"]
    assert run.value("USE_NCU") is False


def test_a_second_run_all_installs_nothing_and_changes_nothing(colab):
    run, first = colab
    again = {tool: len(run.machine.calls(tool)) for tool in ("apt-get", "pip")}
    assert again == {tool: first[tool] for tool in again}, "a second Run all ran apt-get or pip again"
    path = run.value("os.environ['PATH'].split(os.pathsep)")
    assert path.count(path[0]) == 1 and path[0].endswith("nsight-compute/2026.3.1"), path[:3]
    assert run.value("cupti_set").get("cuda-bindings"), "the CUPTI set is decided on Colab's packages, not ours"
    assert_stopped_where_a_gpu_is_needed(run)


def test_nothing_is_written_outside_the_output_and_install_folders(colab):
    root = colab[0].machine.root
    assert list((root / "cwd").iterdir()) == [], "the notebook wrote into the working directory"
    written = {p.relative_to(root / "home").parts[:2] for p in (root / "home").rglob("*") if p.is_file()}
    ours = {(".cache", "nspy_tutorial"), (".cache", "matplotlib")}  # and IPython's own history
    assert {p for p in written if p[0] != ".ipython"} <= ours, f"written outside ~/.cache/nspy_tutorial: {written}"
    assert {p.name for p in (root / "out").iterdir()} <= {"apt.log", "ncu_probe.log", "pip.log", "s1_probe"}


@pytest.fixture(scope="module")
def restarted(start, colab):
    """A runtime restart (a new kernel, PATH as at first), a leftover NSPY_NCU_INIT_AT_IMPORT=0, and a probe that
    says yes as on a GPU: the import cell's Nsight Compute branch."""
    run, _ = colab
    calls = {tool: len(run.machine.calls(tool)) for tool in ("apt-get", "pip")}
    again = start("restart", kernel_env={**run.env, "NSPY_NCU_INIT_AT_IMPORT": "0"}, machine=run.machine)
    return again.cells(again.section_1, before={PROBE: "probe_ncu = lambda *args: (True, '')"}), calls


def test_after_a_restart_dpkg_finds_the_apt_install_and_nothing_is_installed_again(restarted):
    run, calls = restarted
    assert {tool: len(run.machine.calls(tool)) for tool in calls} == calls, "a restart must not install again"
    assert run.outputs[NCU].startswith(f"ncu first on PATH: {run.machine.root}/opt/nvidia/nsight-compute/2026.3.1/")


@pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler to build a loadable fake injection library")
def test_when_the_probe_profiled_nsight_compute_loads_before_torch_despite_a_leftover_init_at_import(restarted):
    run, _ = restarted
    assert run.stopped_at == IMPORT and run.error.ename == "ModuleNotFoundError" and "torch" in run.error.evalue
    assert run.value("str(nsight.get_active_tool())") == "Tool.NCU"
    assert run.value("'NSPY_NCU_INIT_AT_IMPORT' in os.environ") is False


# ---------------------------------------------------------------- NSPY_TUTORIAL_PROFILER=cupti
def test_profiler_cupti_skips_nsight_compute_and_activates_cupti_with_nsights_tool(start):
    run = start("cupti", env={"NSPY_TUTORIAL_PROFILER": "cupti"})
    run.cells(run.section_1)
    assert run.machine.calls("apt-get") == [] and not (run.machine.root / "out/ncu_probe.log").exists()
    assert "NSPY_TUTORIAL_PROFILER=cupti" in run.value("CUPTI_REASON")
    assert_stopped_where_a_gpu_is_needed(run)
    run.kernel.run("# @title test set-up\npreload_libcupti = lambda folder: folder / 'libcupti.so.13'")
    with pytest.raises(CellError, match="cupti-python is required"):  # nsight.activate(CUPTI) asks for it
        run.kernel.run(cell_by_id(run.notebook, IMPORT).source)
    assert run.value("nsight.collection.ncu.injection_load_error is None"), "nsight tried to load Nsight Compute"
    assert run.value("'torch' in sys.modules") is False, "torch must come after the backend is chosen"


# ---------------------------------------------------------------- Run all stops early
@pytest.fixture(scope="module")
def no_gpu(start):
    """A machine without a GPU: every code cell of the notebook in order, until one raises."""
    run = start("no_gpu", gpu=None)
    run.cells(run.all)
    return run, [call["tool"] for call in run.machine.calls()], (run.machine.root / "out").exists()


def test_without_a_gpu_run_all_stops_at_the_first_code_cell_before_anything_is_installed(no_gpu):
    run, tools, made_out = no_gpu
    assert run.stopped_at == run.all[0] == GPU_CHECK, f"stopped at {run.stopped_at}, not the first cell"
    assert "Runtime > Change runtime type > T4 GPU" in run.error.evalue, "say what a Colab user must do"
    assert set(tools) == {"nvidia-smi"} and not made_out, f"ran {tools} or made the output folder without a GPU"
    run.machine.gpu = "Tesla K80, 3.7"
    run.machine.save()
    with pytest.raises(CellError, match="compute capability 3.7"):
        run.kernel.run(cell_by_id(run.notebook, GPU_CHECK).source)


STOPS = {  # setting (with apt unreachable) -> (the cell that stops, what the error names)
    "profiler typo": ({"NSPY_TUTORIAL_PROFILER": "nsys"}, SETUP_HELPERS, "NSPY_TUTORIAL_PROFILER"),
    "CUPTI dir a file": ({"NSPY_TUTORIAL_CUPTI_DIR": "{file}"}, SETUP_HELPERS, "NSPY_TUTORIAL_CUPTI_DIR={file}"),
    "NCU_PATH no file": ({"NCU_PATH": "{root}/none"}, SETUP_HELPERS, "NCU_PATH={root}/none"),
    "NCU_PATH too old": ({"NCU_PATH": "{old}"}, NCU, "NCU_PATH={old}"),
    "profiler ncu, no ncu": ({"NSPY_TUTORIAL_PROFILER": "ncu"}, NCU, "apt-get update failed"),
}


@pytest.mark.parametrize("case", STOPS)
def test_a_setting_that_cannot_be_honoured_stops_run_all_naming_it_before_pip(no_gpu, case):
    run = no_gpu[0]
    run.machine.gpu, run.machine.apt = "Tesla T4, 7.5", "unreachable"
    run.machine.save()
    (run.machine.root / "a_file").write_text("not a folder")
    old = run.machine.ncu_folder("2025.1.1", "old") / "ncu"
    names = {"root": run.machine.root, "file": run.machine.root / "a_file", "old": old}
    settings, cell, said = STOPS[case]
    settings, said = {key: value.format(**names) for key, value in settings.items()}, said.format(**names)
    apt, pip = len(run.machine.calls("apt-get")), len(run.machine.calls("pip"))
    run.kernel.run(f"# @title test set-up\nos.environ.update({settings!r})")
    try:
        run.cells([HARNESS, *run.section_1[run.section_1.index(SETUP_HELPERS) :]])
    finally:
        run.kernel.run(f"# @title test set-up\nfor name in {list(settings)!r}: os.environ.pop(name)")
    assert run.stopped_at == cell and said in run.error.evalue, f"{case}: stopped at {run.stopped_at}: {run.error}"
    assert len(run.machine.calls("pip")) == pip, f"{case}: pip ran for a run that cannot go on"
    assert case == "profiler ncu, no ncu" or len(run.machine.calls("apt-get")) == apt, f"{case}: apt-get ran"
