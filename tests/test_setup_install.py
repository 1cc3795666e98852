"""Section 1's settings and installs: each setting read or refused naming itself; which Nsight Compute versions
are tried, in which order; apt-get update's time limit; the pins the visible pip cell and the CUPTI set install."""

import sys
from importlib.metadata import distribution

import pytest
from fakes import FakeMachine, make_wheelhouse, ncu
from kernel_session import ends_soon
from nsight.collection import ncu as nsight_ncu
from packaging.requirements import Requirement
from packaging.version import Version

from plumbing import setup_helpers as helpers
from plumbing.setup_helpers import accepted_ncu_path, read_ncu_path, read_wheelhouse

BAD = {  # {tmp} holds empty/, old/ncu (2025.1.1) and x/ncu (not executable); a current ncu is on PATH
    "profiler typo": (helpers.read_profiler_choice, "NSPY_TUTORIAL_PROFILER", "nsys", ValueError, "auto, ncu"),
    "wheelhouse missing": (read_wheelhouse, "NSPY_TUTORIAL_WHEELHOUSE", "{tmp}/no", FileNotFoundError, "make_wheel"),
    "wheelhouse empty": (read_wheelhouse, "NSPY_TUTORIAL_WHEELHOUSE", "{tmp}/empty", FileNotFoundError, "make_wheel"),
    "NCU_PATH no file": (read_ncu_path, "NCU_PATH", "{tmp}/no", FileNotFoundError, "2026.2.1 to 2026.3.x"),
    "NCU_PATH folder without ncu": (read_ncu_path, "NCU_PATH", "{tmp}/empty", FileNotFoundError, "or unset it"),
    "NCU_PATH not executable": (read_ncu_path, "NCU_PATH", "{tmp}/x/ncu", FileNotFoundError, "not executable"),
    "NCU_PATH too old": (accepted_ncu_path, "NCU_PATH", "{tmp}/old", ValueError, "2026.2.1"),
    "NCU_PATH too new": (accepted_ncu_path, "NCU_PATH", "{tmp}/new", ValueError, "2026.2.1 to 2026.3.x"),
    "NCU_PATH not ncu": (accepted_ncu_path, "NCU_PATH", "/bin/true", ValueError, "not Nsight Compute"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_setting_is_refused_naming_the_setting_and_the_fix(tmp_path, case):
    read, name, value, error, fix = BAD[case]
    (tmp_path / "empty").mkdir()
    ncu(tmp_path / "old", "2025.1.1")
    ncu(tmp_path / "x", "2026.3.1").chmod(0o644)
    ncu(tmp_path / "new", "2026.4.0")
    with pytest.raises(error) as raised:
        read({name: value.format(tmp=tmp_path), "PATH": str(ncu(tmp_path / "current", "2026.3.1").parent)})
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
    given = ncu(tmp_path / "given", "2026.2.1")
    assert read_ncu_path({"NCU_PATH": str(given.parent)}) == given, "NCU_PATH may name ncu's folder"


@pytest.mark.parametrize(
    "version", [(2026, 2, 1), (2026, 3, 1), (2026, 3, 9), (2026, 4, 0), (2026, 2, 0), (2025, 3, 1)]
)
def test_the_versions_accepted_run_from_nsights_floor_to_the_pinned_ncu_reports_year_and_minor(tmp_path, version):
    fake = ncu(tmp_path, ".".join(map(str, version)))
    assert helpers.ncu_version_of(fake) == version and helpers.ncu_version_of(None) is None
    readable = version[:2] <= Version(helpers.PINS["ncu-report"]).release[:2]  # ncu-report reads its own and older
    assert helpers.ncu_accepted(version) is ((*version, 0) >= nsight_ncu.MIN_NCU_VERSION and readable)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A FakeMachine's executables (and its pip) for this process."""

    def build(**options) -> FakeMachine:
        made = FakeMachine(tmp_path / "machine", **options)
        env = made.build()
        monkeypatch.setenv("PATH", env["PATH"])
        monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
        return made

    monkeypatch.setattr(helpers, "OUT_DIR", tmp_path)
    return build


def test_apt_get_update_has_a_time_limit_that_ends_its_helpers_and_the_install_is_still_tried(
    machine, monkeypatch, capsys
):
    fake = machine(apt="hangs")
    monkeypatch.setitem(helpers.TIME_LIMITS_S, "apt-get update", 1)
    assert helpers.apt_candidates([])[0] == "nsight-compute-2026.3.1", "apt's index is asked all the same"
    assert "apt-get update did not end within 1 s" in (out := capsys.readouterr().out) and "trying anyway" in out
    for pid_file in ("apt.pid", "apt-helper.pid"):
        assert ends_soon(int((fake.root / pid_file).read_text())), f"the hanging apt-get's {pid_file} lives on"


def test_the_pins_cover_everything_nsight_needs_that_colab_lacks():  # PIP_CONSTRAINT pins each; offline, the wheelhouse
    colab = ["numpy", "pandas", "matplotlib", "cuda-bindings", "cuda-pathfinder"]
    covered = {helpers.normalize(name) for name in [*helpers.PINS, *colab]}
    for name in set(helpers.PINS) - {"nvidia-ml-py"}:  # not in the CPU suite's Python; it requires nothing
        requires = map(Requirement, distribution(name).requires or [])
        needs = [r for r in requires if r.marker is None or r.marker.evaluate({"extra": ""})]
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


@pytest.mark.parametrize("wheelhouse", [False, True])
def test_a_pip_cell_that_left_no_pinned_nsight_stops_the_loop_saying_where_to_look(tmp_path, monkeypatch, wheelhouse):
    wheels = make_wheelhouse(tmp_path / "w", {"nvtx": "0.2.17"}, {})
    environ = {"NSPY_TUTORIAL_WHEELHOUSE": str(wheels)} if wheelhouse else {}
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])  # a Python where pip installed nothing
    with pytest.raises(RuntimeError, match="the pip cell left no nsight-python, not nsight-python 1.1.0") as raised:
        helpers.decide_ncu(environ)
    fix = "NSPY_TUTORIAL_WHEELHOUSE may lack a wheel: make_wheelhouse.py" if wheelhouse else "check the network"
    assert fix in str(raised.value), str(raised.value)


@pytest.mark.parametrize(("status", "said"), [(None, "apt-get install did not end within"), (100, "exit 100")])
def test_an_install_that_gave_no_ncu_is_said_with_how_apt_get_ended(machine, monkeypatch, capsys, status, said):
    machine()
    (helpers.OUT_DIR / "apt.log").write_text("E: Unable to fetch some archives\n")
    monkeypatch.setattr(helpers, "run_logged", lambda *args: status)  # None: apt-get ran out of its time
    tried = []
    assert helpers.try_package("nsight-compute-2026.3.1", tried, {"PATH": ""}) is False, "then the next version"
    assert tried[0]["outcome"] == "no ncu" and said in tried[0]["said"] and said in capsys.readouterr().out
