"""Section 1's cells as Run all runs them, in real kernels on simulated machines (tests/fake_env.py)."""

import shutil

import pytest
import recordings
from fake_env import COLAB_SITE, FakeMachine, clean_environment
from kernel_session import CellError, KernelSession

from plumbing.cells import GPU_CHECK, HARNESS, SECTION_ONE_CELLS, SETUP_HELPERS
from plumbing.setup_helpers import PINS

NCU, PROBE, IMPORT = (SECTION_ONE_CELLS[role] for role in ("ncu", "probe", "import"))
HAVE_CC = bool(shutil.which("cc") or shutil.which("gcc"))  # to build a loadable fake injection library
APT_NCU = "opt/nvidia/nsight-compute/2026.3.1/ncu"


class Run:
    """A kernel on a simulated machine that runs the notebook's cells by id until one raises."""

    def __init__(self, notebook: list[dict], machine: FakeMachine, env: dict[str, str]):  # recordings.load_cells()
        self.notebook, self.machine, self.env, self.outputs = notebook, machine, env, {}
        self.kernel = KernelSession(env, machine.root / "cwd", base_env=clean_environment())
        self.all = [cell["id"] for cell in notebook if cell["type"] == "code"]
        self.section_1 = self.all[: self.all.index(IMPORT) + 1]

    def cells(self, ids, before: str = "") -> "Run":
        self.stopped_at = self.error = None
        for cell_id in ids:
            if cell_id == PROBE and before:
                self.kernel.run("# @title test set-up\n" + before)
            try:
                self.outputs[cell_id] = self.kernel.run(recordings.cell_source(self.notebook, cell_id), timeout=300)
            except CellError as error:
                self.outputs[cell_id], self.stopped_at, self.error = error.stdout, cell_id, error
                break
        return self

    def counts(self) -> dict[str, int]:
        return {tool: len(self.machine.calls(tool)) for tool in ("apt-get", "pip")}

    def assert_stopped_where_a_gpu_is_needed(self) -> None:
        assert self.stopped_at == IMPORT and "libcupti.so.13" in self.error.evalue, f"{self.stopped_at}: {self.error}"
        gone = self.kernel.value("[m for m in ('nsight', 'cupti', 'torch') if m in sys.modules]")
        assert gone == [], "preload libcupti before nsight, cupti and torch"


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    notebook, started = recordings.load_cells(), []

    def begin(name: str, kernel_env: dict | None = None, machine: FakeMachine | None = None, **options) -> Run:
        machine = machine or FakeMachine(tmp_path_factory.mktemp(name), **options)
        started.append(Run(notebook, machine, kernel_env or machine.build()))
        return started[-1]

    yield begin
    for run in started:
        run.kernel.close()


@pytest.fixture(scope="module")
def colab(start):
    """Colab: an old ncu on PATH, apt reaches NVIDIA, nsight-python older than the pin."""
    run = start("colab", site={**COLAB_SITE, "nsight-python": "1.0.0"}, injection="loadable" if HAVE_CC else "missing")
    return run.cells(run.section_1)


def test_colab_installs_nsight_compute_with_apt_and_only_the_missing_pins_into_the_tutorials_folders(colab):
    run, root = colab, colab.machine.root
    assert "Tesla T4" in run.outputs[GPU_CHECK], run.outputs
    assert run.machine.apt_installs() == ["nsight-compute-2026.3.1"], "one apt-get install, of Nsight Compute"
    assert run.kernel.value("shutil.which('ncu')") == str(root / APT_NCU), "apt's ncu must come first on PATH"
    argvs = [call["argv"] for call in run.machine.calls("pip")]
    assert all("--no-deps" in argv and "--target" in argv for argv in argvs), f"Colab's packages touched: {argvs}"
    installed = [(argv[argv.index("--target") + 1], {a.split("==")[0] for a in argv if "==" in a}) for argv in argvs]
    home = root / "home/.cache/nspy_tutorial"
    missing = {"nsight-python", "cuda-core", "nvidia-ml-py"}  # Colab's are older, or absent; never torch
    cupti = {"cupti-python", "nvidia-cuda-cupti", "pyelftools", "cuda-bindings"}  # Colab's cuda-bindings is 12
    assert installed == [(str(home / "packages"), missing), (str(home / "cupti13"), cupti)] and missing <= set(PINS)
    where = run.kernel.value("str(importlib.metadata.distribution('nsight-python').locate_file(''))")
    assert where == str(home / "packages"), "nsight-python must import from the tutorial's folder"
    stage = "import torch" if HAVE_CC else "import nsight"  # with the fake injection, nsight loads it
    assert f"backend: CUPTI, because the probe failed at '{stage}'" in run.outputs[PROBE]
    assert run.kernel.value("USE_NCU") is False
    run.assert_stopped_where_a_gpu_is_needed()
    assert list((root / "cwd").iterdir()) == [], "the notebook wrote into the working directory"
    written = {p.relative_to(root / "home").parts[:2] for p in (root / "home").rglob("*") if p.is_file()}
    ours = {(".cache", "nspy_tutorial"), (".cache", "matplotlib")}  # and IPython's own history
    assert {p for p in written if p[0] != ".ipython"} <= ours, f"written outside ~/.cache/nspy_tutorial: {written}"
    assert {p.name for p in (root / "out").iterdir()} <= {"apt.log", "ncu_probe.log", "pip.log", "s1_probe"}


def test_a_second_run_all_installs_nothing_and_changes_nothing(colab):
    run, first = colab, colab.counts()
    run.cells(run.section_1[run.section_1.index(SETUP_HELPERS) + 1 :])  # in the same kernel
    assert run.counts() == first, "a second Run all ran apt-get or pip again"
    path = run.kernel.value("os.environ['PATH'].split(os.pathsep)")
    assert path.count(path[0]) == 1 and path[0].endswith("nsight-compute/2026.3.1"), path[:3]
    assert run.kernel.value("cupti_set").get("cuda-bindings"), "the CUPTI set is decided on Colab's packages, not ours"
    run.assert_stopped_where_a_gpu_is_needed()


def test_after_a_restart_dpkg_finds_apts_ncu_and_a_probe_that_profiled_loads_nsight_compute_before_torch(start, colab):
    first = colab.counts()  # a new kernel (PATH as at first), a leftover NSPY_NCU_INIT_AT_IMPORT=0, a probe saying yes
    run = start("restart", kernel_env={**colab.env, "NSPY_NCU_INIT_AT_IMPORT": "0"}, machine=colab.machine)
    run.cells(run.section_1, before="probe_ncu = lambda *args: (True, '')")
    assert run.counts() == first, "a restart must not install again"
    assert run.outputs[NCU].startswith(f"ncu first on PATH: {run.machine.root / APT_NCU}")
    if HAVE_CC:  # a loadable fake injection library
        assert run.stopped_at == IMPORT and run.error.ename == "ModuleNotFoundError" and "torch" in run.error.evalue
        assert run.kernel.value("str(nsight.get_active_tool())") == "Tool.NCU"
        assert run.kernel.value("'NSPY_NCU_INIT_AT_IMPORT' in os.environ") is False, "it keeps Nsight Compute out"


def test_profiler_cupti_skips_nsight_compute_and_activates_cupti_with_nsights_tool(start):
    run = start("cupti", env={"NSPY_TUTORIAL_PROFILER": "cupti"})
    run.cells(run.section_1)
    assert run.machine.calls("apt-get") == [] and not (run.machine.root / "out/ncu_probe.log").exists()
    assert "NSPY_TUTORIAL_PROFILER=cupti" in run.kernel.value("CUPTI_REASON")
    run.assert_stopped_where_a_gpu_is_needed()
    run.kernel.run("# @title test set-up\npreload_libcupti = lambda folder: folder / 'libcupti.so.13'")
    with pytest.raises(CellError, match="cupti-python is required"):  # nsight.activate(CUPTI) asks for it
        run.kernel.run(recordings.cell_source(run.notebook, IMPORT))
    assert run.kernel.value("nsight.collection.ncu.injection_load_error is None"), "nsight tried to load ncu"
    assert run.kernel.value("'torch' in sys.modules") is False, "torch must come after the backend is chosen"


@pytest.fixture(scope="module")
def no_gpu(start):
    run = start("no_gpu", gpu=None)
    run.cells(run.all)
    assert run.stopped_at == run.all[0] == GPU_CHECK, f"stopped at {run.stopped_at}, not the first cell"
    assert "Runtime > Change runtime type > T4 GPU" in run.error.evalue, "say what a Colab user must do"
    tools = {call["tool"] for call in run.machine.calls()}
    assert tools == {"nvidia-smi"} and not (run.machine.root / "out").exists(), f"ran {tools} or made out/"
    run.machine.gpu = "Tesla K80, 3.7"
    run.machine.save()
    with pytest.raises(CellError, match="compute capability 3.7"):
        run.kernel.run(recordings.cell_source(run.notebook, GPU_CHECK))
    run.machine.gpu, run.machine.apt = "Tesla T4, 7.5", "unreachable"
    run.machine.save()
    return run


STOPS = {  # setting (a T4, apt unreachable) -> (the cell that stops, what the error names)
    "NCU_PATH no file": ({"NCU_PATH": "{root}/none"}, SETUP_HELPERS, "NCU_PATH={root}/none"),
    "NCU_PATH too old": ({"NCU_PATH": "{old}"}, NCU, "NCU_PATH={old}"),
    "profiler ncu, no ncu": ({"NSPY_TUTORIAL_PROFILER": "ncu"}, NCU, "apt-get update failed"),
}


@pytest.mark.parametrize("case", STOPS)
def test_without_a_gpu_run_all_stops_at_once_and_a_setting_that_cannot_be_honoured_stops_it_before_pip(no_gpu, case):
    run, (settings, cell, said) = no_gpu, STOPS[case]
    names = {"root": run.machine.root, "old": run.machine.ncu_folder("2025.1.1", "old") / "ncu"}
    settings, said = {key: value.format(**names) for key, value in settings.items()}, said.format(**names)
    before = run.counts()
    run.kernel.run(f"# @title test set-up\nos.environ.update({settings!r})")
    try:
        run.cells([HARNESS, *run.section_1[run.section_1.index(SETUP_HELPERS) :]])
    finally:
        run.kernel.run(f"# @title test set-up\nfor name in {list(settings)!r}: os.environ.pop(name)")
    assert run.stopped_at == cell and said in run.error.evalue, f"{case}: stopped at {run.stopped_at}: {run.error}"
    assert run.counts()["pip"] == before["pip"], f"{case}: pip ran for a run that cannot go on"
    assert case == "profiler ncu, no ncu" or run.counts() == before, f"{case}: apt-get ran"
