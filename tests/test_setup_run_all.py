"""Section 1's own cells as Run all runs them, in real kernels on simulated machines (tests/fakes.py): fake
apt-get, apt-cache, dpkg, ncu, nvidia-smi and pip on PATH, the real nsight. Where a GPU and torch would be needed,
STAND_IN_PROBE profiles by running the ncu first on PATH, and the machine's ncu answers as it says per version."""

import shutil

import fakes
import pytest
from fakes import STAND_IN_PROBE, FakeMachine, build_fake_injection_library, clean_environment, make_wheelhouse
from kernel_session import CellError, KernelSession
from support import cell_source, load_cells

from plumbing.cells import GPU_CHECK, HARNESS, SECTION_ONE_CELLS, SETUP_HELPERS
from plumbing.setup_helpers import CUPTI_PINS, PINS

ROLE = SECTION_ONE_CELLS
HAVE_CC = bool(shutil.which("cc") or shutil.which("gcc"))  # to build a loadable fake injection library
STAND_IN = f"probe_program = lambda: {STAND_IN_PROBE!r}"  # no GPU, no torch: the probe runs the ncu first on PATH


def apt_ncu(version: str) -> str:
    return f"opt/nvidia/nsight-compute/{version}/ncu"


class Run:
    """A kernel on a simulated machine that runs the notebook's cells by id until one raises."""

    def __init__(self, notebook: list[dict], machine: FakeMachine, env: dict[str, str]):  # support.load_cells()
        self.notebook, self.machine, self.env, self.outputs = notebook, machine, env, {}
        self.kernel = KernelSession(env, machine.root / "cwd", base_env=clean_environment())
        self.all = [cell["id"] for cell in notebook if cell["type"] == "code"]
        self.section_1 = self.all[: self.all.index(ROLE["torch"]) + 1]

    def cells(self, ids, setup: str = "") -> "Run":
        """Run the cells; `setup` (a test's own code, standing in for a GPU) right after the setup-helpers cell."""
        self.stopped_at = self.error = None
        for cell_id in ids:
            try:
                self.outputs[cell_id] = self.kernel.run(cell_source(self.notebook, cell_id), timeout=300)
                if cell_id == SETUP_HELPERS and setup:
                    self.kernel.run(f"# @title test set-up\n{setup}")
            except CellError as error:
                self.outputs[cell_id], self.stopped_at, self.error = error.stdout, cell_id, error
                break
        return self

    def counts(self) -> dict[str, int]:
        return {tool: len(self.machine.calls(tool)) for tool in ("apt-get", "pip")}

    def printed(self) -> str:
        return "\n".join(self.outputs.values())

    def first_ncu(self) -> str:
        return self.kernel.value("shutil.which('ncu')")

    def assert_stopped_at_backend_naming(self, *said: str) -> None:
        """On a CPU the CUPTI probe cannot time a kernel: section 1 stops, naming both reasons."""
        assert self.stopped_at == ROLE["choose"], f"stopped at {self.stopped_at}: {self.error}\n{self.printed()}"
        message = self.error.evalue
        assert message.startswith("Neither backend can time a kernel here") and "CUPTI: the probe failed" in message
        assert all(text in message for text in said), f"the stop must name {said}: {message}"
        assert (self.machine.root / "out/s1_cupti/probe.json").is_file(), "the CUPTI probe writes in the output folder"


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    notebook, started = load_cells(), []

    def begin(name: str, kernel_env: dict | None = None, machine: FakeMachine | None = None, **options) -> Run:
        machine = machine or FakeMachine(tmp_path_factory.mktemp(name), **options)
        started.append(Run(notebook, machine, kernel_env or machine.build()))
        return started[-1]

    yield begin
    for run in started:
        run.kernel.close()


def section_one(start, name, setup=STAND_IN, **options) -> Run:
    run = start(name, **options)
    return run.cells(run.section_1, setup)


@pytest.fixture(scope="module")
def colab(start):
    """Colab as known: an old ncu on PATH, NVIDIA's index with several versions, a driver 2026.3.1 works with."""
    injection = "loadable" if HAVE_CC else "missing"
    return section_one(start, "colab", profiles={"2026.3.1": "works"}, injection=injection)


def test_of_several_listed_versions_the_newest_accepted_is_installed_first_on_path_and_nsight_loads_it(colab):
    run, root = colab, colab.machine.root
    assert "Tesla T4, 7.5, 580.82.07" in run.outputs[GPU_CHECK], f"the GPU, as nvidia-smi names it: {run.outputs}"
    assert run.machine.apt_installs() == ["nsight-compute-2026.3.1"], "the newest that ncu-report reads, once"
    assert run.first_ncu() == str(root / apt_ncu("2026.3.1")), "apt's ncu must come first on PATH"
    assert {call["DEBIAN_FRONTEND"] for call in run.machine.calls("apt-get")} == {"noninteractive"}
    assert "Nsight Compute 2026.3.1 (nsight-compute-2026.3.1): ok" in run.outputs[ROLE["choose"]], run.printed()
    attempts = run.kernel.value("ENVIRONMENT['ncu_attempts']")
    assert [(a["ncu"], a["outcome"]) for a in attempts] == [("nsight-compute-2026.3.1", "ok")], "summary.json's"
    assert run.kernel.value("BACKEND") == {"use_ncu": True, "cupti_reason": "", "libcupti": None}
    (pip,) = run.machine.calls("pip")  # with Nsight Compute, section 1 installs no CUPTI set (section 9 does)
    assert "nsight-python==1.1.0" in pip["argv"] and pip["PIP_CONSTRAINT"], "the pins, as pip's constraints"
    assert pip["PIP_NO_INDEX"] is None, "online, pip uses PyPI"
    if HAVE_CC:  # nsight loaded the fake injection library, so only torch is missing here
        assert run.stopped_at == ROLE["torch"] and run.error.ename == "ModuleNotFoundError", run.error
        assert run.kernel.value("str(nsight.get_active_tool())") == "Tool.NCU"
    assert list((root / "cwd").iterdir()) == [], "the notebook wrote into the working directory"


def test_a_rerun_after_a_restart_uses_the_installed_nsight_compute_without_apt(start, colab):
    before = colab.counts()["apt-get"]
    run = start("rerun", kernel_env=colab.env, machine=colab.machine).cells(colab.section_1, STAND_IN)
    assert run.counts()["apt-get"] == before, "an installed current Nsight Compute needs no apt-get at all"
    assert run.first_ncu() == str(run.machine.root / apt_ncu("2026.3.1"))
    assert "(installed nsight-compute-2026.3.1): ok" in run.outputs[ROLE["choose"]], run.printed()
    assert run.kernel.value("BACKEND['use_ncu']") is True, "the chooser's answer"


STAND_IN_TORCH = """import sys, types
torch = types.ModuleType("torch")  # stands in for torch where no GPU is: imported after nsight, as section 1 does
torch.__version__, torch.cuda = "2.11.0", types.SimpleNamespace(get_device_name=lambda: "Tesla T4")
sys.modules["torch"] = torch
"""


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler to build the fake injection library nsight loads")
def test_run_all_a_second_time_in_the_same_kernel_runs_section_one_through_again(start):
    run = start("twice", profiles={"2026.3.1": "works"}, injection="loadable")
    before_torch = run.section_1[: run.section_1.index(ROLE["torch"])]
    run.cells(before_torch, STAND_IN).kernel.run(f"# @title test set-up\n{STAND_IN_TORCH}")
    run.cells([ROLE["torch"]])
    assert run.stopped_at is None, f"stopped at {run.stopped_at}: {run.error}"
    assert "On this Tesla T4: nsight-python 1.1.0 loaded before torch 2.11.0" in run.printed(), run.printed()
    installs = run.counts()["apt-get"]
    run.cells(run.section_1, STAND_IN)  # Run all again: nsight and torch are imported, nsight first
    assert run.stopped_at is None, f"the second Run all stopped at {run.stopped_at}: {run.error}"
    assert run.counts()["apt-get"] == installs and run.kernel.value("USE_NCU") is True
    assert "Nsight Compute measures" in run.outputs[ROLE["torch"]], run.printed()


def test_an_older_accepted_version_is_installed_when_the_newest_download_fails(start):
    run = section_one(start, "older", broken=["nsight-compute-2026.3.1"], profiles={"2026.3.0": "works"})
    assert run.machine.apt_installs() == ["nsight-compute-2026.3.1", "nsight-compute-2026.3.0"]
    said = "(nsight-compute-2026.3.1): no ncu, apt-get gave no ncu (exit 1)"
    assert said in run.outputs[ROLE["choose"]], run.printed()
    assert run.first_ncu() == str(run.machine.root / apt_ncu("2026.3.0"))
    assert run.kernel.value("BACKEND['use_ncu']") is True, "the chooser's answer"


def test_only_versions_from_the_floor_to_ncu_reports_are_tried_never_the_unversioned_name(start):
    run = section_one(start, "range", broken=fakes.NCU_PACKAGES)  # every download fails
    tried = ["nsight-compute-2026.3.1", "nsight-compute-2026.3.0", "nsight-compute-2026.2.1"]
    assert run.machine.apt_installs() == tried, "no unversioned, -doc or CUDA name; none below 2026.2.1 or above 2026.3"
    run.assert_stopped_at_backend_naming("there is no Nsight Compute 2026.2.1 to 2026.3.x here", "2025.1.1 at")


def test_a_driver_mismatch_moves_to_the_next_version_and_then_to_cupti_naming_the_driver(start):
    versions = ("2026.3.1", "2026.3.0", "2026.2.1")
    run = section_one(start, "driver", driver="580.82.07", profiles=dict.fromkeys(versions, "driver"))
    assert run.machine.apt_installs() == [f"nsight-compute-{version}" for version in versions]
    assert run.outputs[ROLE["choose"]].count("does not support the GPU's driver") == 3, run.printed()
    run.assert_stopped_at_backend_naming(
        "no Nsight Compute tried supports driver 580.82.07 (tried 2026.3.1, 2026.3.0, 2026.2.1)"
    )


def test_counters_refused_says_it_cannot_be_changed_on_colab_and_goes_to_cupti_without_another_version(start):
    run = section_one(start, "counters", profiles={"2026.3.1": "counters", "2026.3.0": "works"})
    assert run.machine.apt_installs() == ["nsight-compute-2026.3.1"], "another version cannot lift the permission"
    run.assert_stopped_at_backend_naming("does not allow GPU performance counters to this process")


@pytest.mark.parametrize("sign", ["torch imported", "libcuda loaded"])
def test_cuda_started_before_import_nsight_stops_at_once_asking_for_a_restart_and_changes_nothing(start, sign):
    run = start(f"started-{sign.split()[0]}")
    run.cells(run.section_1[: run.section_1.index(SETUP_HELPERS) + 1])
    if sign == "torch imported":
        run.kernel.run("# @title test set-up\nimport types\nsys.modules['torch'] = types.ModuleType('torch')")
    else:
        library = build_fake_injection_library(run.machine.root / "libcuda")
        if library is None:
            pytest.skip("no C compiler to build a library named libcuda.so.1")
        library = library.rename(library.with_name("libcuda.so.1"))
        run.kernel.run(f"# @title test set-up\nimport ctypes\nctypes.CDLL({str(library)!r})")
    path = run.kernel.value("os.environ['PATH']")
    run.cells(run.section_1[run.section_1.index(SETUP_HELPERS) + 1 :])
    assert run.stopped_at == ROLE["prepare"] and "Runtime > Restart session, then Run all" in run.error.evalue
    assert run.counts() == {"apt-get": 0, "pip": 0} and run.kernel.value("os.environ['PATH']") == path
    assert run.kernel.value("'PIP_CONSTRAINT' in os.environ") is False, "pip's settings were changed"


def test_the_offline_wheelhouse_run_installs_from_it_tries_no_apt_and_says_so(start, tmp_path_factory):
    wheels = make_wheelhouse(tmp_path_factory.mktemp("wheels"), PINS, CUPTI_PINS)
    run = section_one(start, "offline", env={"NSPY_TUTORIAL_WHEELHOUSE": str(wheels)})
    assert run.machine.calls("apt-get") == [], "offline, apt-get cannot reach NVIDIA"
    pip, cupti = run.machine.calls("pip")
    assert (pip["PIP_NO_INDEX"], pip["PIP_FIND_LINKS"]) == ("1", f"{wheels} {wheels / 'cupti'}"), "pip is offline"
    assert {"--no-index", "--find-links", str(wheels / "cupti")} <= set(cupti["argv"]), "the CUPTI set too"
    run.assert_stopped_at_backend_naming("offline (NSPY_TUTORIAL_WHEELHOUSE), so apt-get was not tried")


def test_profiler_cupti_installs_no_nsight_compute_and_activates_cupti_with_nsights_tool(start):
    run = start("cupti", env={"NSPY_TUTORIAL_PROFILER": "cupti"})
    profiled = "probe_cupti = lambda *args: ''\npreload_libcupti = lambda folder: folder / 'libcupti.so.13'"
    run.cells(run.section_1, profiled)
    assert run.machine.calls("apt-get") == [] and not (run.machine.root / "out/ncu_probe.log").exists()
    assert run.kernel.value("BACKEND['cupti_reason']") == "NSPY_TUTORIAL_PROFILER=cupti"
    assert run.kernel.value("os.environ['NSPY_NCU_INIT_AT_IMPORT']") == "0", "Nsight Compute must stay out"
    assert run.stopped_at == ROLE["import"] and "cupti-python is required" in run.error.evalue, run.error
    assert run.kernel.value("nsight.collection.ncu.injection_load_error is None"), "nsight tried to load ncu"
    assert run.kernel.value("'torch' in sys.modules") is False, "torch must come after the backend is chosen"


@pytest.fixture(scope="module")
def no_gpu(start):
    run = start("no_gpu", gpu=None)
    run.cells(run.all)
    assert run.stopped_at == ROLE["prepare"], f"stopped at {run.stopped_at}, not at the first cell that installs"
    assert "Runtime > Change runtime type > T4 GPU" in run.error.evalue, "say what a Colab user must do"
    tools = {call["tool"] for call in run.machine.calls()}
    assert tools == {"nvidia-smi"} and not (run.machine.root / "out/pip-constraints.txt").exists(), f"ran {tools}"
    run.machine.gpu = "Tesla K80, 3.7"
    run.machine.save()
    with pytest.raises(CellError, match="compute capability 3.7; nsight-python supports 7.5"):
        run.kernel.run(cell_source(run.notebook, ROLE["prepare"]))
    run.machine.gpu, run.machine.apt = "Tesla T4, 7.5", "unreachable"
    run.machine.save()
    return run


STOPS = {  # setting (a T4, apt unreachable) -> (the cell that stops, what the error names)
    "NCU_PATH too old": ({"NCU_PATH": "{old}"}, ROLE["prepare"], "NCU_PATH={old}"),
    "profiler typo": ({"NSPY_TUTORIAL_PROFILER": "nsys"}, ROLE["prepare"], "NSPY_TUTORIAL_PROFILER='nsys'"),
    "profiler ncu, no ncu": ({"NSPY_TUTORIAL_PROFILER": "ncu"}, ROLE["choose"], "NSPY_TUTORIAL_PROFILER=ncu, but"),
}


@pytest.mark.parametrize("case", STOPS)
def test_without_a_gpu_run_all_stops_at_once_and_a_bad_setting_stops_it_before_any_install(no_gpu, case):
    run, (settings, cell, said) = no_gpu, STOPS[case]
    names = {"root": run.machine.root, "old": run.machine.ncu_folder("2025.1.1") / "ncu"}
    settings, said = {key: value.format(**names) for key, value in settings.items()}, said.format(**names)
    before = run.counts()
    run.kernel.run(f"# @title test set-up\nimport os\nos.environ.update({settings!r})")
    try:
        run.cells([HARNESS, *run.section_1[run.section_1.index(SETUP_HELPERS) :]])
    finally:
        run.kernel.run(f"# @title test set-up\nfor name in {list(settings)!r}: os.environ.pop(name)")
    assert run.stopped_at == cell and said in run.error.evalue, f"{case}: stopped at {run.stopped_at}: {run.error}"
    assert case == "profiler ncu, no ncu" or run.counts() == before, f"{case}: apt-get or pip ran"
