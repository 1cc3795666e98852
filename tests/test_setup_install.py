"""Section 1's settings and installs: each setting read or refused naming itself, the ncu chosen, apt, pip."""

from importlib.metadata import distribution
from pathlib import Path

import pytest
import recordings
from fake_env import FakeMachine, executable, make_wheelhouse
from kernel_session import ends_soon
from nsight.collection import ncu as nsight_ncu
from packaging.requirements import Requirement
from packaging.version import Version

from plumbing import setup_helpers as helpers
from plumbing.cells import SECTION_ONE_CELLS
from plumbing.setup_helpers import choose_ncu, ncu_install_needed, read_ncu_path, read_wheelhouse

PACKAGE = "nsight-compute-2026.3.1"


def fake_ncu(folder: Path, version: str, mode: int = 0o755) -> Path:
    script = f"#!/bin/sh\necho 'NVIDIA (R) Nsight Compute'\necho 'Version {version}.0 (build 7)'\n"
    executable(folder / "ncu", script).chmod(mode)
    return folder / "ncu"


def auto(environ, profiler="auto"):
    return choose_ncu([], profiler, None, environ)


BAD = {  # {tmp} holds empty/, a_file, old/ncu (2025.1.1) and x/ncu (not executable); a current ncu is on PATH
    "profiler typo": (helpers.read_profiler_choice, "NSPY_TUTORIAL_PROFILER", "nsys", ValueError, "auto, ncu"),
    "wheelhouse missing": (read_wheelhouse, "NSPY_TUTORIAL_WHEELHOUSE", "{tmp}/no", FileNotFoundError, "make_wheel"),
    "wheelhouse empty": (read_wheelhouse, "NSPY_TUTORIAL_WHEELHOUSE", "{tmp}/empty", FileNotFoundError, "make_wheel"),
    "NCU_PATH no file": (read_ncu_path, "NCU_PATH", "{tmp}/no", FileNotFoundError, "2026.2.1 or newer"),
    "NCU_PATH folder without ncu": (read_ncu_path, "NCU_PATH", "{tmp}/empty", FileNotFoundError, "or unset it"),
    "NCU_PATH not executable": (read_ncu_path, "NCU_PATH", "{tmp}/x/ncu", FileNotFoundError, "not executable"),
    "NCU_PATH too old": (auto, "NCU_PATH", "{tmp}/old", ValueError, "2026.2.1"),
    "NCU_PATH not ncu": (auto, "NCU_PATH", "/bin/true", ValueError, "not Nsight Compute"),
    "NCU_PATH bad under cupti": (lambda env: auto(env, "cupti"), "NCU_PATH", "{tmp}/no", FileNotFoundError, "unset"),
    "CUPTI dir a file": (helpers.read_cupti_dir, "NSPY_TUTORIAL_CUPTI_DIR", "{tmp}/a_file", ValueError, "a file"),
    "CUPTI dir in /proc": (helpers.read_cupti_dir, "NSPY_TUTORIAL_CUPTI_DIR", "/proc/x", ValueError, "made"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD)
def test_a_bad_setting_is_refused_naming_the_setting_and_the_fix(tmp_path, case):
    read, name, value, error, fix = BAD[case]
    (tmp_path / "empty").mkdir()
    (tmp_path / "a_file").write_text("")
    fake_ncu(tmp_path / "old", "2025.1.1"), fake_ncu(tmp_path / "x", "2026.3.1", 0o644)
    with pytest.raises(error) as raised:
        read({name: value.format(tmp=tmp_path), "PATH": str(fake_ncu(tmp_path / "current", "2026.3.1").parent)})
    assert f"{name}=" in str(raised.value) and fix in str(raised.value), f"{case}: say the setting and its fix"


def test_settings_name_the_folder_or_file_they_say(tmp_path, monkeypatch):
    assert helpers.read_profiler_choice({}) == "auto"
    assert helpers.read_profiler_choice({"NSPY_TUTORIAL_PROFILER": " CUPTI "}) == "cupti"
    make_wheelhouse(tmp_path / "wheels", {"a": "1.0"}, {})
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert read_wheelhouse({}) is None and read_ncu_path({}) is None
    for given in ("~/wheels", "wheels"):
        assert read_wheelhouse({"NSPY_TUTORIAL_WHEELHOUSE": given}) == tmp_path / "wheels", f"resolve {given}"
    ncu = fake_ncu(tmp_path / "given", "2026.2.1")
    assert read_ncu_path({"NCU_PATH": str(ncu.parent)}) == ncu, "NCU_PATH may name ncu's folder"
    later = tmp_path / "new" / "cupti"
    assert helpers.read_cupti_dir({"NSPY_TUTORIAL_CUPTI_DIR": str(later)}) == later
    assert not (tmp_path / "new").exists(), "checking the CUPTI folder setting must not make it"


@pytest.mark.parametrize("version", [(2026, 2, 1), (2026, 3, 1), (2027, 1, 0), (2026, 2, 0), (2025, 3, 1)])
def test_the_ncu_floor_is_the_one_nsight_enforces(tmp_path, version):
    ncu = fake_ncu(tmp_path, ".".join(map(str, version)))
    assert helpers.ncu_version_of(ncu) == version and helpers.ncu_version_of(None) is None
    assert helpers.ncu_is_recent(version) is ((*version, 0) >= nsight_ncu.MIN_NCU_VERSION)


def test_the_ncu_chosen_is_ncu_path_then_the_packages_then_the_first_current_one_on_path_else_none_explained(tmp_path):
    ncus = {name: fake_ncu(tmp_path / name, version) for name, version in
            [("chosen", "2026.2.1"), ("newer", "2026.3.1"), ("opt", "2026.3.1"), ("old", "2025.3.1")]}  # fmt: skip
    on_path = {"PATH": f"{ncus['old'].parent}:{ncus['newer'].parent}"}
    assert choose_ncu([], "auto", None, {"NCU_PATH": str(ncus["chosen"]), **on_path}) == (
        ncus["chosen"], "Nsight Compute 2026.2.1 from NCU_PATH")  # fmt: skip
    listed = [str(tmp_path / "opt"), str(fake_ncu(tmp_path / "opt/target/x64", "2026.3.1")), str(ncus["opt"])]
    assert choose_ncu(listed, "auto", None, on_path)[0] == ncus["opt"], "the package's own, top launcher"
    assert choose_ncu([], "auto", None, on_path)[0] == ncus["newer"], "a current ncu behind an old one on PATH"
    chosen, why = choose_ncu([], "auto", tmp_path / "wheels", {"PATH": str(ncus["old"].parent)})
    assert chosen is None and f"2025.3.1 at {ncus['old']}" in why and "NSPY_TUTORIAL_WHEELHOUSE" in why, why
    with pytest.raises(RuntimeError, match="NSPY_TUTORIAL_PROFILER=ncu"):
        choose_ncu([], "ncu", None, {"PATH": str(ncus["old"].parent)})
    assert choose_ncu([], "cupti", None, on_path) == (None, "NSPY_TUTORIAL_PROFILER=cupti")


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A FakeMachine's executables (and its pip) for this process; apt's last failure forgotten afterwards."""

    def build(**options) -> FakeMachine:
        made = FakeMachine(tmp_path / "machine", **options)
        env = made.build()
        monkeypatch.setenv("PATH", env["PATH"]), monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
        return made

    monkeypatch.setitem(helpers.APT_FAILURE, "why", "")
    monkeypatch.delenv("DEBIAN_FRONTEND", raising=False)  # apt-get's must come from apt_get_install
    return build


def test_apt_installs_noninteractively_only_when_no_current_ncu_is_there_and_dpkg_finds_it(tmp_path, machine):
    fake = machine(path_ncus=["2025.3.1"])
    assert not ncu_install_needed(PACKAGE, "auto", tmp_path / "wheels"), "offline, apt-get cannot reach NVIDIA"
    assert not ncu_install_needed(PACKAGE, "cupti", None), "CUPTI needs no Nsight Compute"
    assert ncu_install_needed(PACKAGE, "auto", None), "only an old ncu on PATH: apt-get must install one"
    helpers.apt_get_install(PACKAGE, tmp_path / "apt.log")
    assert fake.apt_installs() == [PACKAGE] and helpers.APT_FAILURE["why"] == "", (tmp_path / "apt.log").read_text()
    assert {call["DEBIAN_FRONTEND"] for call in fake.calls("apt-get")} == {"noninteractive"}
    assert not ncu_install_needed(PACKAGE, "auto", None), "dpkg lists the package's ncu: apt-get must not run again"


def test_apt_unreachable_is_said_with_its_log_and_the_reason_names_it(tmp_path, machine, capsys):
    fake = machine(apt="unreachable")
    helpers.apt_get_install(PACKAGE, tmp_path / "apt.log")
    assert str(tmp_path / "apt.log") in capsys.readouterr().out, "the failure must point at apt's log"
    assert fake.apt_installs() == [], "after a failed update, install must not be tried"
    assert "apt-get update failed (exit 100" in choose_ncu([], "auto", None, {"PATH": ""})[1]


def test_apt_has_time_for_a_slow_link_and_a_hung_one_is_stopped_with_its_helper(tmp_path, machine, monkeypatch):
    fake = machine(apt="hangs")
    assert helpers.TIME_LIMITS_S["apt"] >= 1.0e9 / 2.0e6, "a 1 GB package at 2 MB/s: a shorter one sends Colab to CUPTI"
    monkeypatch.setitem(helpers.TIME_LIMITS_S, "apt", 1)
    helpers.apt_get_install(PACKAGE, tmp_path / "apt.log")
    assert "no end within 1 s" in helpers.APT_FAILURE["why"]
    for pid_file in ("apt.pid", "apt-helper.pid"):
        assert ends_soon(int((fake.root / pid_file).read_text())), f"the hanging apt-get's {pid_file} lives on"


def test_ncu_report_is_at_least_as_new_as_the_ncu_apt_installs():
    source = recordings.cell_source(recordings.load_cells(), SECTION_ONE_CELLS["apt"])
    apt = source.split("nsight-compute-", 1)[1].split('"')[0]
    assert Version(helpers.PINS["ncu-report"]).release[:2] >= Version(apt).release[:2], f"raise ncu-report to {apt}"


def test_installs_without_dependencies_still_bring_everything_nsight_needs():  # pip runs with --no-deps
    colab = ["numpy", "pandas", "matplotlib", "cuda-bindings", "cuda-pathfinder"]
    covered = {helpers.normalize(name) for name in [*helpers.PINS, *colab]}
    for name in set(helpers.PINS) - {"nvidia-ml-py"}:  # not in the CPU suite's Python; it requires nothing
        needs = [r for r in map(Requirement, distribution(name).requires or []) if r.marker is None
                 or r.marker.evaluate({"extra": ""})]  # fmt: skip
        assert {helpers.normalize(r.name) for r in needs} <= covered, f"{name} needs {needs}: pin what it lacks"


@pytest.mark.parametrize(("colab_has", "installs_bindings"), [("13.0.1", False), ("12.9.2", True), (None, True)])
def test_cuda_bindings_go_into_the_cupti_folder_only_when_this_python_lacks_13(colab_has, installs_bindings):
    pins = helpers.cupti_pins({"cuda-bindings": colab_has} if colab_has else {})
    assert ("cuda-bindings" in pins) is installs_bindings and {"cupti-python", "nvidia-cuda-cupti"} <= set(pins)


def test_an_offline_install_uses_only_the_wheelhouse_and_a_missing_wheel_says_how_to_remake_it(tmp_path, machine):
    fake, wheels = machine(), make_wheelhouse(tmp_path / "wheels", {"a-pkg": "1.0"}, {})
    assert helpers.install_pins({"a-pkg": "1.0"}, tmp_path / "into", wheels, tmp_path / "pip.log") == ["a-pkg==1.0"]
    assert {"--no-index", "--find-links", str(wheels)} <= set(fake.calls("pip")[0]["argv"]), "offline, from wheels"
    with pytest.raises(RuntimeError) as raised:
        helpers.install_pins({"no-such-xyz": "1.0"}, tmp_path / "into", wheels, tmp_path / "pip.log")
    wanted = ("no-such-xyz==1.0", f"NSPY_TUTORIAL_WHEELHOUSE={wheels}", f"--python-version {helpers.PYTHON}")
    assert all(text in str(raised.value) for text in wanted), "name the wheel, the setting, how to remake it"
