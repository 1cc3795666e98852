"""Section 1's helpers (plumbing/setup_helpers.py), imported: settings, ncu versions and the choice of ncu, apt,
pins and pip, libcupti, the probe. Section 1's cells on simulated machines are in test_setup_behaviour.py; section
9's CUPTI child in test_cupti_child.py.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import nbformat
import pytest
from nsight.collection import ncu as nsight_ncu
from packaging.requirements import Requirement
from support import NOTEBOOK, section_code_cells

from plumbing import setup_helpers
from plumbing.setup_helpers import (
    check_backend,
    choose_ncu,
    cupti_pins,
    install_pins,
    ncu_is_recent,
    ncu_version_of,
    parse_ncu_version,
    preload_libcupti,
    read_ncu_path,
    read_profiler_choice,
    read_wheelhouse,
)

ROOT = Path(__file__).resolve().parent.parent
COLAB_HAS = ("numpy", "pandas", "matplotlib", "cuda-bindings", "cuda-pathfinder")  # what the installs rely on


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
    with pytest.raises(ValueError, match="auto, ncu or cupti"):
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
    assert f"NSPY_TUTORIAL_WHEELHOUSE={tmp_path} ({tmp_path}) holds no wheels" in message, message
    assert "make_wheelhouse.py" in message and "network" not in message


# ---------------------------------------------------------------- Nsight Compute versions
def test_ncu_version_is_parsed_from_the_version_line():
    text = "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2026\nVersion 2026.3.1.0 (build 1)"
    assert parse_ncu_version(text) == (2026, 3, 1)
    assert parse_ncu_version("ncu: command not found") is None and parse_ncu_version(None) is None


@pytest.mark.parametrize("version", [(2026, 2, 1), (2026, 3, 1), (2027, 1, 0), (2026, 2, 0), (2025, 3, 1)])
def test_ncu_floor_is_the_one_nsight_enforces(version):
    assert ncu_is_recent(version) is ((*version, 0) >= nsight_ncu.MIN_NCU_VERSION)
    assert ncu_is_recent(None) is False


def test_ncu_path_names_the_ncu_or_its_folder_and_is_chosen_before_path(tmp_path):
    chosen, other = fake_ncu(tmp_path / "chosen", "2026.2.1.0"), fake_ncu(tmp_path / "other", "2026.3.1.0")
    environ = {"NCU_PATH": str(chosen.parent), "PATH": str(other.parent)}
    assert read_ncu_path(environ) == chosen and ncu_version_of(chosen) == (2026, 2, 1)
    assert choose_ncu([], "auto", None, environ)[0] == chosen, "NCU_PATH must win over a newer ncu on PATH"


def test_an_ncu_path_that_names_no_file_is_an_error_that_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"NCU_PATH={tmp_path / 'none'}: there is no file") as raised:
        read_ncu_path({"NCU_PATH": str(tmp_path / "none")})
    assert "Set NCU_PATH to the ncu of Nsight Compute 2026.2.1 or newer" in str(raised.value)
    with pytest.raises(FileNotFoundError, match="there is no file .*/ncu"):
        read_ncu_path({"NCU_PATH": str(tmp_path)})  # a folder without an ncu in it


def test_an_ncu_path_that_is_not_executable_is_an_error_that_says_so(tmp_path):
    ncu = fake_ncu(tmp_path / "given", "2026.3.1.0")
    ncu.chmod(0o644)
    with pytest.raises(FileNotFoundError, match=f"NCU_PATH={ncu}: {ncu} is not executable"):
        read_ncu_path({"NCU_PATH": str(ncu)})


@pytest.mark.parametrize(("version", "said"), [("2025.1.1.0", "Nsight Compute 2025.1.1"), (None, "not Nsight Compute")])
def test_an_ncu_path_that_is_no_current_nsight_compute_is_refused_not_passed_over(tmp_path, version, said):
    given = fake_ncu(tmp_path / "given", version) if version else Path("/bin/true")
    current = fake_ncu(tmp_path / "current", "2026.3.1.0")
    with pytest.raises(ValueError, match=f"NCU_PATH={given}: {given} is {said}, not 2026.2.1"):
        choose_ncu([], "auto", None, {"NCU_PATH": str(given), "PATH": str(current.parent)})


def test_the_packages_own_ncu_is_the_top_launcher_dpkg_lists_and_wins_over_an_old_one_on_path(tmp_path):
    top = fake_ncu(tmp_path / "opt" / "2026.3.1", "2026.3.1.0")
    deeper = fake_ncu(tmp_path / "opt" / "2026.3.1" / "target" / "linux-x64", "2026.3.1.0")
    old = fake_ncu(tmp_path / "cuda", "2025.1.1.0")
    listed = [str(tmp_path / "opt"), str(deeper), str(top)]
    chosen, what = choose_ncu(listed, "auto", None, {"PATH": str(old.parent)})
    assert (chosen, what) == (top, "Nsight Compute 2026.3.1"), "the package's own ncu, fewest folders deep"


def test_without_a_current_ncu_the_reason_names_what_was_found_and_why_apt_was_not_tried(tmp_path):
    old = fake_ncu(tmp_path / "cuda", "2025.3.1.0")
    chosen, why = choose_ncu([], "auto", tmp_path / "wheels", {"PATH": str(old.parent)})
    assert chosen is None and f"found: 2025.3.1 at {old}" in why and "apt-get was not tried" in why, why
    with pytest.raises(RuntimeError, match="NSPY_TUTORIAL_PROFILER=ncu, but there is no ncu 2026.2.1"):
        choose_ncu([], "ncu", None, {"PATH": str(old.parent)})
    assert choose_ncu([], "cupti", None, {"PATH": str(old.parent)}) == (None, "NSPY_TUTORIAL_PROFILER=cupti")


NCU_PACKAGE_BYTES = 1.0e9  # an nsight-compute-<version> apt package is about 1 GB
SLOW_DOWNLOAD_BYTES_PER_S = 2.0e6  # an assumed slow link, not a measurement: the limit must not be the bottleneck


def test_the_apt_install_has_time_to_download_nsight_compute_on_a_slow_link():
    """A limit that cuts a healthy download sends Colab to CUPTI for nothing (sections 4, 6, 7, 10 SKIPPED)."""
    needed = NCU_PACKAGE_BYTES / SLOW_DOWNLOAD_BYTES_PER_S
    assert setup_helpers.TIME_LIMITS_S["apt"] >= needed, (
        f"apt's limit {setup_helpers.TIME_LIMITS_S['apt']} s is under the {needed:.0f} s a 1 GB package takes at 2 MB/s"
    )


# ---------------------------------------------------------------- pins
def test_ncu_report_pin_is_at_least_the_newest_ncu_apt_installs():
    """nsight refuses an ncu-report older (year.minor) than the ncu it drives."""
    report = tuple(int(p) for p in setup_helpers.PINS["ncu-report"].split(".")[:2])
    section_1 = section_code_cells(nbformat.read(NOTEBOOK, as_version=4), 1)  # the package its apt cell installs
    package = next(line for cell in section_1 for line in cell.source.splitlines() if "NCU_PACKAGE =" in line)
    newest_apt = tuple(int(p) for p in re.search(r"nsight-compute-(\d+)\.(\d+)", package).groups())
    assert report >= newest_apt, f"ncu-report {report} is older than the ncu {newest_apt} apt installs"


def test_installs_without_dependencies_still_bring_everything_nsight_needs():
    """pip runs with --no-deps, so every requirement of a pinned package must be pinned or expected present."""
    covered = {setup_helpers.normalize(name) for name in [*setup_helpers.PINS, *COLAB_HAS]}
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
        install_pins({"no-such-package-xyz": "1.0"}, tmp_path / "target", empty_wheelhouse, tmp_path / "pip.log")
    assert "no-such-package-xyz" in str(raised.value)
    assert "lacks a wheel" in str(raised.value) and "network" not in str(raised.value), "offline, the network is moot"


# ---------------------------------------------------------------- libcupti
def test_missing_libcupti_says_which_cell_to_rerun(tmp_path):
    with pytest.raises(FileNotFoundError, match="run section 1's pip cell again"):
        preload_libcupti(tmp_path)


def test_cupti_library_check_accepts_only_the_preloaded_file(tmp_path):
    preloaded, other = tmp_path / "libcupti.so.13", tmp_path / "libcupti.so.12"
    preloaded.write_text("13")
    other.write_text("12")
    check_backend(None, False, preloaded, {"NVTX_INJECTION64_PATH": str(preloaded)})
    for resolved in (str(other), ""):
        with pytest.raises(RuntimeError, match="not the preloaded"):
            check_backend(None, False, preloaded, {"NVTX_INJECTION64_PATH": resolved})


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
    facts = setup_helpers.environment_facts(torch, nsight, False, "no ncu here", tmp_path / "libcupti.so.13")
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
    assert reason.startswith("the probe failed at 'import nsight'") and "What to do:" in reason, reason


# ---------------------------------------------------------------- finding or installing ncu, on a simulated machine
def machine_path(tmp_path, monkeypatch, **options):
    """A FakeMachine's executables (tests/fake_env.py) on PATH, in this process, for the helpers to call."""
    from fake_env import FakeMachine

    machine = FakeMachine(tmp_path / "machine", **options)
    monkeypatch.setenv("PATH", machine.build()["PATH"])
    return machine


def test_apt_unreachable_is_said_with_its_log_and_leaves_cupti(tmp_path, monkeypatch, capsys):
    machine = machine_path(tmp_path, monkeypatch, apt="unreachable")
    setup_helpers.apt_get_install("nsight-compute-2026.3.1", tmp_path / "apt.log")
    said = capsys.readouterr().out
    assert "apt-get update failed (exit 100" in said and str(tmp_path / "apt.log") in said, said
    assert "Could not resolve host" in (tmp_path / "apt.log").read_text()
    assert machine.apt_installs() == [], "after a failed update, install must not be tried"
    assert "apt-get update failed" in choose_ncu([], "auto", None, {"PATH": ""})[1], "the reason must name apt"
    setup_helpers.APT_FAILURE["why"] = ""


def test_apt_that_hangs_is_stopped_at_its_time_limit_with_its_helper(tmp_path, monkeypatch, capsys):
    from kernel_session import ends_soon

    machine = machine_path(tmp_path, monkeypatch, apt="hangs")
    monkeypatch.setitem(setup_helpers.TIME_LIMITS_S, "apt", 2)
    setup_helpers.apt_get_install("nsight-compute-2026.3.1", tmp_path / "log")
    assert "no end within 2 s" in capsys.readouterr().out
    for pid_file in ("apt.pid", "apt-helper.pid"):
        assert ends_soon(int((machine.root / pid_file).read_text())), f"the hanging apt-get's {pid_file} lives on"
    setup_helpers.APT_FAILURE["why"] = ""


def test_a_working_apt_installs_the_package_noninteractively_and_dpkg_lists_its_ncu(tmp_path, monkeypatch):
    machine = machine_path(tmp_path, monkeypatch)
    environ = {"PATH": os.environ["PATH"]}
    assert setup_helpers.ncu_install_needed("nsight-compute-2026.3.1", "auto", None, environ)
    setup_helpers.apt_get_install("nsight-compute-2026.3.1", tmp_path / "log")
    assert machine.apt_installs() == ["nsight-compute-2026.3.1"] and setup_helpers.APT_FAILURE["why"] == ""
    assert {call["DEBIAN_FRONTEND"] for call in machine.calls("apt-get")} == {"noninteractive"}
    assert not setup_helpers.ncu_install_needed("nsight-compute-2026.3.1", "auto", None, environ), (
        "once dpkg lists the package's ncu, a second Run all must not run apt-get again"
    )


def test_a_current_ncu_behind_an_old_one_on_path_needs_no_apt_and_is_chosen(tmp_path, monkeypatch):
    machine = machine_path(tmp_path, monkeypatch, path_ncus=["2025.1.1", "2026.2.1"])
    environ = {"PATH": os.environ["PATH"]}
    assert not setup_helpers.ncu_install_needed("nsight-compute-2026.3.1", "auto", None, environ)
    assert choose_ncu([], "auto", None, environ)[0] == machine.root / "path-ncu-2026.2.1" / "ncu"


def test_offline_or_on_cupti_apt_is_not_needed(tmp_path, monkeypatch):
    machine_path(tmp_path, monkeypatch, path_ncus=["2025.3.1"])
    environ = {"PATH": os.environ["PATH"]}
    assert not setup_helpers.ncu_install_needed("nsight-compute-2026.3.1", "auto", tmp_path / "wheels", environ)
    assert not setup_helpers.ncu_install_needed("nsight-compute-2026.3.1", "cupti", None, environ)
    assert setup_helpers.ncu_install_needed("nsight-compute-2026.3.1", "auto", None, environ)


def test_a_probe_that_hangs_is_stopped_and_named(tmp_path, monkeypatch):
    monkeypatch.setitem(setup_helpers.TIME_LIMITS_S, "probe", 2)
    hangs = "import time\ntime.sleep(60)"
    usable, reason = setup_helpers.probe_ncu(tmp_path / "ncu", f"{tmp_path}/p/", tmp_path / "probe.log", hangs)
    assert not usable and "the Nsight Compute probe did not finish within 2 s" in reason, reason


@pytest.mark.parametrize(
    ("error", "remedy"),
    [
        ("ProfilerException: PROFILING FAILED \nErrors:\n- ==ERROR== ERR_NVGPUCTRPERM - The user does not have "
         "permission", "NVreg_RestrictProfilingToAdminUsers=0"),
        ("ProfilerException: NVIDIA Nsight Compute 2026.2.1.0 or later is required, but found 2025.3.1.0",
         f"Nsight Compute {setup_helpers.NCU_FLOOR}+ first on PATH"),
    ],
)  # fmt: skip
def test_probe_failures_name_cause_and_remedy(tmp_path, error, remedy):
    report = json.dumps({"ncu": None, "stage": "profile one kernel", "error": error})
    writes = f"import sys, pathlib\npathlib.Path(sys.argv[1], 'probe.json').write_text({report!r})"
    (tmp_path / "p").mkdir()
    usable, text = setup_helpers.probe_ncu(tmp_path / "ncu", f"{tmp_path}/p/", tmp_path / "probe.log", writes)
    assert not usable and remedy in text and "profile one kernel" in text, text
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
    with pytest.raises(ValueError, match=r"NSPY_TUTORIAL_CUPTI_DIR=/proc/x: /proc/x cannot be made"):
        setup_helpers.read_cupti_dir({"NSPY_TUTORIAL_CUPTI_DIR": "/proc/x"})
    with pytest.raises(ValueError, match="is a file, not a folder"):
        setup_helpers.read_cupti_dir({"NSPY_TUTORIAL_CUPTI_DIR": __file__})
    made_later = tmp_path / "new" / "cupti"
    assert setup_helpers.read_cupti_dir({"NSPY_TUTORIAL_CUPTI_DIR": str(made_later)}) == made_later
    assert not (tmp_path / "new").exists(), "checking the setting must not leave a folder behind"


def test_a_bad_ncu_path_is_refused_even_when_the_profiler_is_cupti(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"NCU_PATH={tmp_path / 'none'}: there is no file"):
        choose_ncu([], "cupti", None, {"NCU_PATH": str(tmp_path / "none")})


def test_a_probe_that_dies_before_answering_is_not_taken_for_an_earlier_runs_answer(tmp_path):
    prefix = tmp_path / "s1_probe"
    prefix.mkdir()
    (prefix / "probe.json").write_text(json.dumps({"ncu": str(tmp_path / "ncu"), "stage": "done", "error": ""}))
    dies = "import os\nos._exit(139)"
    usable, reason = setup_helpers.probe_ncu(tmp_path / "ncu", f"{prefix}/", tmp_path / "probe.log", dies)
    assert not usable and "exit 139" in reason, f"a stale probe.json from an earlier Run all was believed: {reason}"
