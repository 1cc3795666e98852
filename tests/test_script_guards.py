"""No input to the shell scripts destroys work (issue 25): run_headless, setup_gpu_runner and run_tests.

Each harmful input is refused with exit 2 and a message that names the setting or argument and the fix, before
anything is installed or written: the clone's files stay byte for byte as they were. The scripts run for real
(bash) in a copy of the clone (fake_env.fresh_clone), with a sandbox HOME and a fake python3 and nvidia-smi on PATH
(fake_env.script_machine) that record what they were asked and install nothing.
"""

from __future__ import annotations

import getpass
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_env import FAKE_PYTHON, fresh_clone, invoked, pip_installs, run_script
from support import ROOT

NOTEBOOK = "nsight_python_t4_tutorial.ipynb"
CHANGES = ("-m pip install", "-m ipykernel install", "-m pytest", "-m venv")  # what a refused run must not ask


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under folder and its bytes: equal before and after means the run changed nothing there."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def assert_refused(status: int, output: str, asked: list[str], named: str) -> None:
    assert status == 2, f"the input must be refused with exit 2, before anything is done; got {status}:\n{output}"
    assert named in output, f"the refusal must name {named!r}:\n{output}"
    done = [line for step in CHANGES for line in invoked(asked, step)]
    assert not done, f"refused, yet the script asked python to {done}: the check must come before the step"


@pytest.fixture
def clone(tmp_path) -> Path:
    return fresh_clone(tmp_path / "clone")


def run_in(clone: Path, script: str, *args, cwd: Path | None = None, **settings):
    """A script of the clone, run from cwd (default: the clone) on the fake machine in the clone's parent."""
    return run_script(str(clone / script), clone.parent, *args, cwd=cwd or clone, **settings)


# ---------------------------------------------------------------- run_headless: the output folder
@pytest.mark.parametrize(
    ("how", "named"),
    [("argument .", "output folder argument (.)"),
     ("NSPY_TUTORIAL_OUT=the clone", "NSPY_TUTORIAL_OUT="),
     ("NSPY_TUTORIAL_OUT=..", "NSPY_TUTORIAL_OUT=.."),
     ("argument: another clone", "output folder argument"),
     ("argument: a link to the clone", "output folder argument")],
)  # fmt: skip
def test_run_headless_refuses_an_output_folder_where_the_executed_notebook_would_overwrite_the_tutorial(
    clone, how, named
):
    other = fresh_clone(clone.parent / "other")  # another clone of the project, e.g. the developer's main one
    (clone.parent / "link").symlink_to(clone)
    args, settings = {
        "argument .": (["."], {}),
        "NSPY_TUTORIAL_OUT=the clone": ([], {"NSPY_TUTORIAL_OUT": clone}),
        "NSPY_TUTORIAL_OUT=..": ([], {"NSPY_TUTORIAL_OUT": ".."}),
        "argument: another clone": ([str(other)], {}),
        "argument: a link to the clone": ([str(clone.parent / "link")], {}),
    }[how]
    before, other_before = files_of(clone), files_of(other)
    status, output, asked = run_in(clone, "scripts/run_headless", *args, FAKE_HARNESS_MISSING=1, **settings)
    assert_refused(status, output, asked, named)
    assert "folder of its own" in output, f"the refusal must say what to give instead:\n{output}"
    assert files_of(clone) == before and files_of(other) == other_before, f"{how} changed a clone's files"


def test_run_headless_still_writes_into_a_folder_inside_the_clone_and_into_a_previous_runs_folder(clone):
    for _ in range(2):  # the second run finds the first run's executed notebook there: that one may be replaced
        status, output, _ = run_in(clone, "scripts/run_headless", "runs/first", FAKE_EXECUTED=clone.parent / "none")
        assert status == 0, f"an output folder of its own inside the clone must be accepted:\n{output}"
    assert (clone / "runs" / "first" / "run_info.json").exists()


# ---------------------------------------------------------------- run_headless: arguments and settings
def test_run_headless_prepare_only_refuses_an_extra_argument_instead_of_ignoring_it(clone):
    status, output, asked = run_in(clone, "scripts/run_headless", "--prepare-only", "EXTRA", FAKE_HARNESS_MISSING=1)
    assert_refused(status, output, asked, "--prepare-only")
    assert "EXTRA" in output, output


@pytest.mark.parametrize("value", ["99999999999999999999", "0", "86401", "-5", "1e3"])
def test_run_headless_refuses_a_cell_timeout_outside_1_to_86400_naming_it(clone, value):
    status, output, asked = run_in(
        clone, "scripts/run_headless", NSPY_TUTORIAL_CELL_TIMEOUT=value, FAKE_HARNESS_MISSING=1
    )
    assert_refused(status, output, asked, f"NSPY_TUTORIAL_CELL_TIMEOUT={value} is not a whole number")
    assert "integer expression expected" not in output, f"bash's own error leaked out:\n{output}"


def test_run_headless_hands_a_cell_timeout_with_a_leading_zero_on_as_decimal(clone, tmp_path):
    status, output, _ = run_in(clone, "scripts/run_headless", str(tmp_path / "out"), NSPY_TUTORIAL_CELL_TIMEOUT="0900")
    assert status == 0, f"0900 seconds is 900 seconds, not an octal error:\n{output}"


@pytest.mark.parametrize("value", ['abc"def0', "abcdef0\\", "abcdef0\nabcdef0", "main", "abc", "ABCDEF0"])
def test_run_headless_refuses_a_commit_setting_that_is_not_a_commit_id(clone, value):
    status, output, asked = run_in(clone, "scripts/run_headless", NSPY_TUTORIAL_COMMIT=value, FAKE_HARNESS_MISSING=1)
    assert_refused(status, output, asked, "NSPY_TUTORIAL_COMMIT=")
    assert "7 to 40 lower-case hex digits" in output, output


def test_run_info_json_names_the_commit_setting_and_is_json(clone, tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    status, output, _ = run_in(
        clone, "scripts/run_headless", str(tmp_path / "out"), NSPY_TUTORIAL_COMMIT=commit, FAKE_EXECUTED="none"
    )
    assert status == 0, output
    info = json.loads((tmp_path / "out" / "run_info.json").read_text())
    assert info["commit"] == commit and info["pytest_exit"] == 0, info
    assert set(info) == {"commit", "notebook_sha256", "started_utc", "wall_seconds", "pytest_exit"}, info


def test_run_headless_refuses_a_tilde_user_that_names_no_user_instead_of_making_a_folder_of_that_name(clone):
    status, output, asked = run_in(
        clone, "scripts/run_headless", NSPY_TUTORIAL_OUT="~nspy_no_such_user/x", FAKE_HARNESS_MISSING=1
    )
    assert_refused(status, output, asked, "NSPY_TUTORIAL_OUT=~nspy_no_such_user/x")
    assert "no user 'nspy_no_such_user'" in output, output
    assert not (clone / "~nspy_no_such_user").exists(), "a folder literally named ~nspy_no_such_user was made"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("~/x", lambda home, cwd: f"{home}/x"),
     (f"~{getpass.getuser()}/x", lambda home, cwd: f"{pwd.getpwnam(getpass.getuser()).pw_dir}/x"),
     ("rel/x", lambda home, cwd: f"{cwd}/rel/x"),
     ("/abs/x", lambda home, cwd: "/abs/x")],
)  # fmt: skip
def test_every_folder_setting_expands_tilde_and_tilde_user_and_takes_a_relative_one_from_the_current_folder(
    tmp_path, value, expected
):
    """scripts/settings.bash absolute_folder, which both scripts use for every folder they are given."""
    home = tmp_path / "home"
    code = f'refuse() {{ echo "refused: $*"; exit 2; }}; source {ROOT}/scripts/settings.bash; absolute_folder S "$1"'
    done = subprocess.run(
        ["bash", "-c", code + '; echo "$REPLY"', "bash", value],
        cwd=tmp_path, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.stdout.strip() == expected(home, tmp_path), f"{value!r} became {done.stdout.strip()!r}{done.stderr}"


# ---------------------------------------------------------------- PYTHON, for both scripts
@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/run_tests"])
@pytest.mark.parametrize("value", ["README.md", "./README.md", shutil.which("true") or "/bin/true"])
def test_scripts_say_a_file_that_is_no_executable_python_is_not_one(clone, script, value):
    (clone / "README.md").write_text("# not a Python\n")
    status, output, asked = run_in(clone, script, "--prepare-only" if "headless" in script else "-q", PYTHON=value)
    assert_refused(status, output, asked, f"PYTHON={value} is not an executable Python")
    assert "not found" not in output, f"the file exists: say what it is not, not that it is missing:\n{output}"


@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/run_tests"])
def test_scripts_take_a_relative_python_from_the_current_folder_through_the_whole_run(clone, script, tmp_path):
    work = tmp_path / "user" / "work"  # ../../bin/python3 is the fake machine's from here, nothing from the clone
    work.mkdir(parents=True)
    args = [str(tmp_path / "out")] if "headless" in script else ["-q"]
    status, output, _ = run_in(
        clone, script, *args, cwd=work, PYTHON="../../bin/python3", FAKE_EXECUTED="none", NSPY_TUTORIAL_TEST_VENV="venv"
    )
    assert status == 0, f"a relative PYTHON must still name the same Python after the script cds:\n{output}"


# ---------------------------------------------------------------- setup_gpu_runner
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_setup_gpu_runner_answers_help_with_usage_and_installs_nothing(clone, flag):
    status, output, asked = run_in(clone, "scripts/setup_gpu_runner", flag, FAKE_HARNESS_MISSING=1)
    assert status == 0 and output.startswith("usage: scripts/setup_gpu_runner"), output
    assert asked == [], f"setup_gpu_runner {flag} asked python to {asked}: it must only print its usage"


@pytest.mark.parametrize("args", [["DIR"], ["--prepare-only"], ["--hlep"], ["DIR", "--help"]])
def test_setup_gpu_runner_refuses_any_argument_before_it_installs(clone, args):
    status, output, asked = run_in(clone, "scripts/setup_gpu_runner", *args, FAKE_HARNESS_MISSING=1)
    assert status == 2 and "takes no arguments" in output and args[0] in output, output
    assert asked == [], f"setup_gpu_runner {args} asked python to {asked}: nothing may run before the refusal"
    assert not pip_installs(clone.parent)


# ---------------------------------------------------------------- run_tests: the venv
def test_run_tests_expands_tilde_in_the_venv_setting_and_makes_no_folder_named_tilde(clone, tmp_path):
    status, output, _ = run_in(clone, "scripts/run_tests", "-q", NSPY_TUTORIAL_TEST_VENV="~/v")
    assert status == 0, output
    assert (tmp_path / "v" / "bin" / "python").exists(), "~ is the home folder (the fake HOME: the machine's folder)"
    assert not (clone / "~").exists(), "a folder literally named ~ was made inside the clone"


def test_run_tests_takes_a_relative_venv_setting_from_the_current_folder_not_the_clone(clone, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    status, output, _ = run_in(clone, "scripts/run_tests", "-q", cwd=work, NSPY_TUTORIAL_TEST_VENV="v")
    assert status == 0, output
    assert (work / "v" / "bin" / "python").exists() and not (clone / "v").exists(), "v is ./v where the user is"


def test_run_tests_refuses_a_venv_it_did_not_make_instead_of_changing_its_packages(clone, tmp_path):
    venv = tmp_path / "their_venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.3\n")
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")
    (venv / "bin" / "python").chmod(0o755)
    before = files_of(venv)
    status, output, asked = run_in(clone, "scripts/run_tests", "-q", NSPY_TUTORIAL_TEST_VENV=venv)
    assert_refused(status, output, asked, f"NSPY_TUTORIAL_TEST_VENV={venv} is a virtual environment this script did")
    assert not pip_installs(tmp_path), "pip ran in a venv that is not this project's"
    assert files_of(venv) == before, "the other venv was changed"


def test_run_tests_refuses_its_venv_when_pythons_version_changed_and_says_to_remove_it(clone, tmp_path):
    venv = tmp_path / "venv"
    status, output, _ = run_in(clone, "scripts/run_tests", "-q", NSPY_TUTORIAL_TEST_VENV=venv)
    assert status == 0 and (venv / ".nspy_tutorial_test_venv").exists(), f"a venv it makes must be marked:\n{output}"
    (tmp_path / "python.log").write_text("")  # what the second run asks, only
    status, output, asked = run_in(
        clone, "scripts/run_tests", "-q", NSPY_TUTORIAL_TEST_VENV=venv, FAKE_PYTHON_VERSION="3.13.1"
    )
    assert_refused(status, output, asked, f"NSPY_TUTORIAL_TEST_VENV={venv} ({venv}) was made with Python 3.12.3")
    assert f"rm -rf {venv}" in output and "set PYTHON to the Python it was made with" in output, output
    assert len(pip_installs(tmp_path)) == 1, "the venv of another Python must not be installed into"


def test_run_tests_keeps_and_marks_a_default_venv_made_before_the_mark_existed(clone, tmp_path):
    old = clone / ".ci" / "venv"  # as an older run_tests made it: a venv of the machine's python3, unmarked
    (old / "bin").mkdir(parents=True)
    (old / "bin" / "python").write_text(FAKE_PYTHON)
    (old / "bin" / "python").chmod(0o755)
    status, output, asked = run_in(clone, "scripts/run_tests", "-q")
    assert status == 0, f"the default .ci/venv of an older run_tests must be kept:\n{output}"
    assert (old / ".nspy_tutorial_test_venv").exists(), "and marked as this script's"
    assert not invoked(asked, "-m venv"), "an existing venv must never be made again over itself"


def test_run_tests_names_the_venv_setting_when_the_venv_cannot_be_made(clone):
    status, output, asked = run_in(clone, "scripts/run_tests", "-q", NSPY_TUTORIAL_TEST_VENV="/proc/nspy_no_such/x")
    assert status == 2 and "NSPY_TUTORIAL_TEST_VENV=/proc/nspy_no_such/x cannot be made" in output, output
    assert not pip_installs(clone.parent)
