"""Section 1's helpers (plumbing/setup_helpers.py), imported: settings, ncu versions and candidates, pins, pip,
libcupti, and section 9's CUPTI child command. Section 1's cells on simulated machines are in test_setup_behaviour.py.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from nsight.collection import ncu as nsight_ncu
from packaging.requirements import Requirement

from plumbing import setup_helpers
from plumbing.setup_helpers import (
    apt_versions_to_try,
    check_cupti_library,
    child_environment,
    cupti_pins,
    ncu_candidates,
    ncu_is_recent,
    ncu_version_of,
    parse_ncu_version,
    pip_install,
    preload_libcupti,
    read_profiler_choice,
    read_wheelhouse,
)

ROOT = Path(__file__).resolve().parent.parent


def fake_ncu(folder: Path, version: str) -> Path:
    path = folder / "ncu"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'NVIDIA (R) Nsight Compute'\necho 'Version {version} (build 7)'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


# ---------------------------------------------------------------- settings
def test_profiler_choice_defaults_to_auto_and_rejects_typos():
    assert read_profiler_choice({}) == "auto"
    assert read_profiler_choice({"NSPY_TUTORIAL_PROFILER": " CUPTI "}) == "cupti"
    with pytest.raises(ValueError, match="auto, ncu, cupti"):
        read_profiler_choice({"NSPY_TUTORIAL_PROFILER": "nsys"})


def test_a_wheelhouse_that_is_not_a_folder_says_how_to_make_one(tmp_path):
    (tmp_path / "nsight_python-1.1.0-py3-none-any.whl").write_text("")
    assert read_wheelhouse({}) is None and read_wheelhouse({"NSPY_TUTORIAL_WHEELHOUSE": str(tmp_path)}) == tmp_path
    with pytest.raises(FileNotFoundError, match="scripts/make_wheelhouse.py"):
        read_wheelhouse({"NSPY_TUTORIAL_WHEELHOUSE": str(tmp_path / "missing")})


def test_an_empty_wheelhouse_is_named_with_how_to_make_one_not_blamed_on_the_network(tmp_path):
    with pytest.raises(FileNotFoundError) as raised:
        read_wheelhouse({"NSPY_TUTORIAL_WHEELHOUSE": str(tmp_path)})
    message = str(raised.value)
    assert f"NSPY_TUTORIAL_WHEELHOUSE={tmp_path} holds no wheels" in message and "make_wheelhouse.py" in message


# ---------------------------------------------------------------- Nsight Compute versions
def test_ncu_version_is_parsed_from_the_version_line():
    text = "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2026\nVersion 2026.3.1.0 (build 1)"
    assert parse_ncu_version(text) == (2026, 3, 1)
    assert parse_ncu_version("ncu: command not found") is None and parse_ncu_version(None) is None


@pytest.mark.parametrize("version", [(2026, 2, 1), (2026, 3, 1), (2027, 1, 0), (2026, 2, 0), (2025, 3, 1)])
def test_ncu_floor_is_the_one_nsight_enforces(version):
    assert ncu_is_recent(version) is ((*version, 0) >= nsight_ncu.MIN_NCU_VERSION)
    assert ncu_is_recent(None) is False


def test_ncu_path_folder_is_searched_before_path(tmp_path):
    chosen, other = fake_ncu(tmp_path / "chosen", "2026.2.1.0"), fake_ncu(tmp_path / "other", "2026.3.1.0")
    found = ncu_candidates({"NCU_PATH": str(chosen.parent), "PATH": str(other.parent)})
    assert found == [chosen, other]
    assert ncu_version_of(chosen) == (2026, 2, 1)


def test_an_ncu_path_that_names_no_file_is_an_error_that_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"NCU_PATH={tmp_path / 'none'}: there is no file") as raised:
        ncu_candidates({"NCU_PATH": str(tmp_path / "none"), "PATH": ""})
    assert "set NCU_PATH to the ncu of Nsight Compute 2026.2.1 or newer" in str(raised.value)
    with pytest.raises(FileNotFoundError, match="there is no file .*/ncu"):
        ncu_candidates({"NCU_PATH": str(tmp_path), "PATH": ""})  # a folder without an ncu in it


def test_an_ncu_path_that_is_not_executable_is_an_error_that_says_so(tmp_path):
    ncu = fake_ncu(tmp_path / "given", "2026.3.1.0")
    ncu.chmod(0o644)
    with pytest.raises(PermissionError, match=f"NCU_PATH={ncu}: {ncu} is not executable. Run chmod \\+x"):
        ncu_candidates({"NCU_PATH": str(ncu), "PATH": ""})


def test_apt_versions_are_newest_first_and_never_below_the_floor():
    tried = apt_versions_to_try(("2026.2.1", "2025.1.1", "2027.1.0", "2026.3.1", "2026.2.0"))
    assert tried == ["2027.1.0", "2026.3.1", "2026.2.1"]


def test_ncu_install_without_apt_explains_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    path, message = setup_helpers.install_ncu_with_apt(["2026.3.1"], tmp_path / "log")
    assert path is None and "NCU_PATH" in message


NCU_PACKAGE_BYTES = 1.0e9  # an nsight-compute-<version> apt package is about 1 GB
SLOW_DOWNLOAD_BYTES_PER_S = 2.0e6  # an assumed slow link, not a measurement: the limit must not be the bottleneck


def test_the_apt_install_has_time_to_download_nsight_compute_on_a_slow_link():
    """A limit that cuts a healthy download sends Colab to CUPTI for nothing (sections 4, 6, 7, 10 SKIPPED)."""
    needed = NCU_PACKAGE_BYTES / SLOW_DOWNLOAD_BYTES_PER_S
    assert setup_helpers.TIME_LIMITS_S["apt_install"] >= needed, (
        f"apt_install's limit {setup_helpers.TIME_LIMITS_S['apt_install']} s is under the {needed:.0f} s "
        "a 1 GB package takes at 2 MB/s"
    )


# ---------------------------------------------------------------- pins
def test_ncu_report_pin_is_at_least_the_newest_ncu_apt_installs():
    """nsight refuses an ncu-report older (year.minor) than the ncu it drives."""
    report = tuple(int(p) for p in setup_helpers.PINS["ncu-report"].split(".")[:2])
    newest_apt = tuple(int(p) for p in apt_versions_to_try()[0].split(".")[:2])
    assert report >= newest_apt, f"ncu-report {report} is older than the ncu {newest_apt} apt installs"


def test_installs_without_dependencies_still_bring_everything_nsight_needs():
    """pip runs with --no-deps, so every requirement of a pinned package must be pinned or expected present."""
    covered = {setup_helpers.normalize(name) for name in [*setup_helpers.PINS, *setup_helpers.EXPECTED_PRESENT]}
    checked = set()
    for name in setup_helpers.PINS:
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:  # nvidia-ml-py is not in the CPU suite's environment; it has no requirements
            continue
        checked.add(name)
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            assert setup_helpers.normalize(requirement.name) in covered, f"{name} needs {requirement.name}"
    assert {"nsight-python", "cuda-core", "deepdiff"} <= checked


@pytest.mark.parametrize(("colab_has", "installs_bindings"), [("13.0.1", False), ("12.9.2", True), (None, True)])
def test_cuda_bindings_go_into_the_cupti_folder_only_when_this_python_lacks_13(colab_has, installs_bindings):
    pins = cupti_pins({"cuda-bindings": colab_has} if colab_has else {})
    assert ("cuda-bindings" in pins) is installs_bindings, pins
    assert {"cupti-python", "nvidia-cuda-cupti"} <= set(pins)


def test_failed_pip_install_raises_with_pips_error_and_what_to_do(tmp_path):
    empty_wheelhouse = tmp_path / "wheels"
    empty_wheelhouse.mkdir()
    with pytest.raises(RuntimeError, match="NSPY_TUTORIAL_WHEELHOUSE") as raised:
        pip_install(["no-such-package-xyz==1.0"], tmp_path / "pip.log", wheelhouse=empty_wheelhouse)
    assert "no-such-package-xyz" in str(raised.value)
    assert "lacks a wheel" in str(raised.value) and "network" not in str(raised.value), "offline, the network is moot"


def test_imported_from_names_the_folder_a_package_comes_from():
    assert setup_helpers.imported_from("pytest") == Path(pytest.__file__).resolve().parent.parent
    assert setup_helpers.imported_from("no-such-distribution-xyz") is None


# ---------------------------------------------------------------- libcupti
def test_missing_libcupti_says_which_cell_to_rerun(tmp_path):
    with pytest.raises(FileNotFoundError, match="Re-run the CUPTI install cell"):
        preload_libcupti(tmp_path)


def test_cupti_library_check_accepts_only_the_preloaded_file(tmp_path):
    preloaded, other = tmp_path / "libcupti.so.13", tmp_path / "libcupti.so.12"
    preloaded.write_text("13")
    other.write_text("12")
    assert check_cupti_library(preloaded, {"NVTX_INJECTION64_PATH": str(preloaded)}) == preloaded
    for resolved in (str(other), ""):
        with pytest.raises(RuntimeError, match="not the preloaded"):
            check_cupti_library(preloaded, {"NVTX_INJECTION64_PATH": resolved})


# ---------------------------------------------------------------- section 9's CUPTI child
def test_cupti_child_gets_no_nsight_compute_variables_and_the_cupti_folder_first():
    env = child_environment("/x/libcupti.so.13", {"NVTX_INJECTION64_PATH": "/ncu/inj.so", "PYTHONPATH": "/mine"})
    assert "NVTX_INJECTION64_PATH" not in env and env["NSPY_NCU_INIT_AT_IMPORT"] == "0"
    assert env["PYTHONPATH"].split(":") == [str(setup_helpers.CUPTI_PACKAGES_DIR), "/mine"]
    assert env["NSPY_TUTORIAL_LIBCUPTI"] == "/x/libcupti.so.13"


def product_body(n: int) -> None:
    """A stand-in benchmark: the child receives this function's source."""
    del n


RECORDING_PYTHON = """#!{python}
import json, sys
from pathlib import Path
prefix = sys.argv[5]  # python CHILD BENCHMARK FUNCTION SIZES PREFIX
Path(prefix, "argv.json").write_text(json.dumps(sys.argv[1:]))
Path(prefix, "child_result.json").write_text(json.dumps({{"rows": [], "wall_s": 0.1, "tool": "cupti",
                                                        "libcupti": {libcupti!r}}}))
"""


def recording_python(tmp_path, monkeypatch, bound_to=None):
    """A CUPTI folder with a libcupti.so.13, and a python that records how the child was started; the child it
    stands in for reports CUPTI bound to `bound_to` (default: that libcupti). Returns (python, libcupti)."""
    monkeypatch.setattr(setup_helpers, "CUPTI_PACKAGES_DIR", tmp_path / "cupti")
    libcupti = tmp_path / "cupti" / "nvidia" / "cu13" / "lib" / "libcupti.so.13"
    libcupti.parent.mkdir(parents=True)
    libcupti.write_text("")
    python = tmp_path / "python"
    python.write_text(RECORDING_PYTHON.format(python=sys.executable, libcupti=str(bound_to or libcupti)))
    python.chmod(0o755)
    return str(python), libcupti


def test_cupti_child_is_run_with_the_benchmarks_own_source_and_the_sizes(tmp_path, monkeypatch):
    """The notebook writes plumbing/cupti_child.py and the benchmark's source, then runs the child on them."""
    python, _ = recording_python(tmp_path, monkeypatch)
    child = (ROOT / "plumbing" / "cupti_child.py").read_text()
    folder = tmp_path / "s9_cupti"
    result = setup_helpers.run_cupti_child(product_body, [512, 1024], folder, child, python=python)
    assert result["tool"] == "cupti"
    argv = json.loads((folder / "argv.json").read_text())
    assert argv == [str(folder / "cupti_child.py"), str(folder / "benchmark.py"), "product_body", "[512, 1024]",
                    f"{folder}/"]  # fmt: skip
    assert (folder / "cupti_child.py").read_text() == child
    assert (folder / "benchmark.py").read_text().startswith("def product_body(n: int) -> None:")


def test_cupti_child_bound_to_another_libcupti_is_an_error(tmp_path, monkeypatch):
    python, _ = recording_python(tmp_path, monkeypatch, bound_to="/usr/lib/libcupti.so.12")
    with pytest.raises(RuntimeError, match="instead of the preloaded"):
        setup_helpers.run_cupti_child(product_body, [512], tmp_path / "out", "", python=python)


def test_importing_the_plumbing_loads_neither_torch_nor_nsight_nor_cupti():
    """Section 1 must import nsight before torch; the helpers that run before it may import neither."""
    probe = "import sys, plumbing.harness, plumbing.setup_helpers\n"
    probe += "print(sorted({'torch', 'nsight', 'cupti'} & {*sys.modules}))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", f"the plumbing imports {done.stdout.strip()}"


def test_the_environment_names_the_gpu_the_ncu_on_path_and_the_backend(tmp_path, monkeypatch):
    """What summary.json and the recordings say about the machine; torch is a stand-in (no GPU here), nsight is real."""
    from types import SimpleNamespace

    import nsight

    props = SimpleNamespace(name="Tesla T4", major=7, minor=5, multi_processor_count=40, L2_cache_size=4 << 20,
                            total_memory=15 * 2**30)  # fmt: skip
    cuda = SimpleNamespace(get_device_properties=lambda index: props)
    matmul = SimpleNamespace(allow_tf32=False)
    backends = SimpleNamespace(cuda=SimpleNamespace(matmul=matmul))
    torch = SimpleNamespace(cuda=cuda, __version__="2.11.0", version=SimpleNamespace(cuda="13.0"), backends=backends)
    ncu = fake_ncu(tmp_path / "ncu_bin", "2026.3.1.0")
    monkeypatch.setenv("PATH", f"{ncu.parent}{os.pathsep}{os.environ['PATH']}")
    facts = setup_helpers.environment_facts(torch, nsight, "cupti", "no ncu here", tmp_path / "libcupti.so.13")
    assert (facts["gpu"], facts["compute_capability"], facts["l2_bytes"]) == ("Tesla T4", "7.5", 4 << 20)
    assert (facts["ncu_path"], facts["ncu_version"]) == (str(ncu), "2026.3.1")
    assert (facts["profiler"], facts["cupti_reason"], facts["nsight_python"]) == ("cupti", "no ncu here", "1.1.0")
    assert facts["libcupti"] == str(tmp_path / "libcupti.so.13") and facts["memory_gib"] == 15.0


def test_the_probe_reports_where_nsight_compute_failed_and_what_to_do(tmp_path, monkeypatch):
    """plumbing/ncu_probe.py with the real nsight, on a machine without ncu: the probe stops at 'import nsight' and
    section 1 falls back to CUPTI with that reason."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no ncu here
    script = (ROOT / "plumbing" / "ncu_probe.py").read_text()
    usable, reason = setup_helpers.probe_ncu(tmp_path / "ncu", f"{tmp_path}/probe/", tmp_path / "probe.log", script)
    assert usable is False
    assert reason.startswith("the Nsight Compute probe failed at 'import nsight'") and "What to do:" in reason, reason


# ---------------------------------------------------------------- finding or installing ncu, on a simulated machine
def machine_path(tmp_path, monkeypatch, **options):
    """A FakeMachine's executables (tests/fake_env.py) on PATH, in this process, for the helpers to call."""
    from fake_env import FakeMachine

    machine = FakeMachine(tmp_path / "machine", **options)
    monkeypatch.setenv("PATH", machine.build()["PATH"])
    return machine


def test_apt_unreachable_tries_each_current_version_newest_first_and_quotes_apts_error(tmp_path, monkeypatch):
    machine = machine_path(tmp_path, monkeypatch, apt="unreachable")
    path, message = setup_helpers.install_ncu_with_apt(setup_helpers.NSIGHT_COMPUTE_APT_VERSIONS, tmp_path / "log")
    assert path is None and "Could not resolve host" in message, message
    assert machine.apt_installs() == ["nsight-compute-2026.3.1", "nsight-compute-2026.2.1"], (
        "apt must try the current versions newest first, and nothing older than the floor"
    )


def test_apt_that_hangs_is_stopped_at_its_time_limit_with_its_helper(tmp_path, monkeypatch):
    from kernel_session import ends_soon

    machine = machine_path(tmp_path, monkeypatch, apt="hangs")
    monkeypatch.setitem(setup_helpers.TIME_LIMITS_S, "apt_update", 2)
    path, message = setup_helpers.install_ncu_with_apt(["2026.3.1"], tmp_path / "log")
    assert path is None and "apt-get update did not finish within 2 s" in message, message
    for pid_file in ("apt.pid", "apt-helper.pid"):
        assert ends_soon(int((machine.root / pid_file).read_text())), f"the hanging apt-get's {pid_file} lives on"


def test_a_working_apt_gives_the_packages_own_launcher_not_a_per_platform_copy(tmp_path, monkeypatch):
    machine_path(tmp_path, monkeypatch)
    path, message = setup_helpers.install_ncu_with_apt(["2026.3.1"], tmp_path / "log")
    assert message == "installed nsight-compute-2026.3.1 with apt-get"
    listed = subprocess.run(["dpkg", "-L", "nsight-compute-2026.3.1"], capture_output=True, text=True).stdout
    launchers = [Path(line) for line in listed.split() if line.endswith("/ncu")]
    assert len(launchers) > 1 and path == min(launchers, key=lambda launcher: len(launcher.parts)), (path, launchers)


def test_a_current_ncu_behind_an_old_one_on_path_is_chosen_without_apt(tmp_path, monkeypatch):
    machine = machine_path(tmp_path, monkeypatch, path_ncus=["2025.1.1", "2026.2.1"])
    path, message = setup_helpers.find_or_install_ncu("auto", None, tmp_path / "log")
    assert path == machine.root / "path-ncu-2026.2.1" / "ncu" and "already there" in message, (path, message)
    assert machine.calls("apt-get") == [], "a current ncu was on PATH: apt-get must not run"
    environ = {"PATH": os.environ["PATH"]}
    setup_helpers.put_first_on_path(path.parent, environ)
    entries = environ["PATH"].split(os.pathsep)
    assert entries[0] == str(path.parent) and entries.count(str(path.parent)) == 1


def test_offline_an_old_ncu_is_named_and_apt_is_not_tried(tmp_path, monkeypatch):
    machine = machine_path(tmp_path, monkeypatch, path_ncus=["2025.3.1"])
    path, message = setup_helpers.find_or_install_ncu("auto", tmp_path / "wheelhouse", tmp_path / "log")
    assert path is None and machine.calls("apt-get") == [], message
    assert "found: 2025.3.1 at" in message and "apt-get was not tried" in message and "NCU_PATH" in message


def test_a_probe_that_hangs_is_stopped_and_named(tmp_path, monkeypatch):
    monkeypatch.setitem(setup_helpers.TIME_LIMITS_S, "probe", 2)
    hangs = "import time\ntime.sleep(60)"
    usable, reason = setup_helpers.probe_ncu(tmp_path / "ncu", "prefix/", tmp_path / "probe.log", hangs)
    assert not usable and "the Nsight Compute probe did not finish within 2 s" in reason, reason


@pytest.mark.parametrize(
    ("error", "remedy"),
    [
        ("ProfilerException: PROFILING FAILED \nErrors:\n- ==ERROR== ERR_NVGPUCTRPERM - The user does not have "
         "permission", "NVreg_RestrictProfilingToAdminUsers=0"),
        ("ProfilerException: NVIDIA Nsight Compute 2026.2.1.0 or later is required, but found 2025.3.1.0",
         f"Nsight Compute {setup_helpers.NCU_FLOOR}+ first on PATH"),
        ("ModuleNotFoundError: No module named 'torch'", "CUDA build of PyTorch"),
    ],
)  # fmt: skip
def test_probe_failures_name_cause_and_remedy(error, remedy):
    text = setup_helpers.explain_probe_failure({"stage": "profile one kernel", "error": error})
    assert remedy in text and "profile one kernel" in text
    if "==ERROR==" in error:
        assert "ERR_NVGPUCTRPERM" in text, "the cause sits on a later line of nsight's message: it must be shown"


# ---------------------------------------------------------------- the notebook's folder settings
def test_a_wheelhouse_setting_with_a_tilde_or_a_relative_folder_is_the_folder_it_names(tmp_path, monkeypatch):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a-1.0-py3-none-any.whl").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for given in ("~/wheels", "wheels"):
        assert read_wheelhouse({"NSPY_TUTORIAL_WHEELHOUSE": given}) == tmp_path / "wheels", (
            f"NSPY_TUTORIAL_WHEELHOUSE={given} must name {tmp_path / 'wheels'}: expand ~ and resolve it here"
        )


def test_a_cupti_folder_that_cannot_be_made_is_refused_naming_the_setting_before_anything_is_installed(tmp_path):
    with pytest.raises(ValueError, match=r"NSPY_TUTORIAL_CUPTI_DIR=/proc/x: the folder /proc/x cannot be made"):
        setup_helpers.read_cupti_dir({"NSPY_TUTORIAL_CUPTI_DIR": "/proc/x"})
    setup_helpers.SETUP_STOPPED["reason"] = ""  # the refusal stopped section 1; other tests start afresh
    made_later = tmp_path / "new" / "cupti"
    assert setup_helpers.read_cupti_dir({"NSPY_TUTORIAL_CUPTI_DIR": str(made_later)}) == made_later
    assert not (tmp_path / "new").exists(), "checking the setting must not leave a folder behind"


def test_a_bad_ncu_path_is_refused_even_when_the_profiler_is_cupti(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"NCU_PATH={tmp_path / 'none'}: there is no file"):
        setup_helpers.find_or_install_ncu("cupti", None, tmp_path / "log", {"NCU_PATH": str(tmp_path / "none")})
    assert setup_helpers.find_or_install_ncu("cupti", None, tmp_path / "log", {})[0] is None
