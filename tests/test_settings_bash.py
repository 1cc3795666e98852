"""scripts/settings.bash through both scripts: PYTHON (3.11 or newer, that runs, that answers in time)."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from fakes import failing_command, hanging_command, pip_installs, run_script
from support import ROOT

SCRIPTS = {"scripts/run_headless": ["--prepare-only"], "scripts/run_tests": ["-q"]}  # the cheapest full run of each
FLOOR = int(re.search(r'target-version = "py3(\d+)"', (ROOT / "pyproject.toml").read_text()).group(1))


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize(
    ("python", "version", "named"),
    [
        ("python3.99", None, "PYTHON=python3.99"),
        ("README.md", None, "PYTHON=README.md"),  # a file here, no command on PATH
        ("./README.md", None, "PYTHON=./README.md"),  # not executable
        (shutil.which("true") or "/bin/true", None, "PYTHON=/"),  # runs, says no version
        ("python3.12", None, "pyenv: python3.12: command not found"),  # what it said
        ("python3.13", None, "does not run: it exited with status 1 and printed nothing"),
        (None, f"3.{FLOOR - 1}.12", f"needs Python 3.{FLOOR} or newer"),  # a high patch level does not help
        (None, "2.7.18", "PYTHON="),
    ],
)
def test_scripts_refuse_a_python_they_cannot_use_naming_it_and_change_nothing(tmp_path, script, python, version, named):
    (tmp_path / "README.md").write_text("# not a Python\n")
    failing_command(tmp_path / "shims/python3.12", "pyenv: python3.12: command not found", 127)
    failing_command(tmp_path / "shims/python3.13")  # fails silently
    settings = {"PYTHON": python} if python else {"FAKE_PYTHON_VERSION": version}
    settings["PATH"] = os.pathsep.join([str(tmp_path / "shims"), str(tmp_path / "bin"), os.environ["PATH"]])
    settings.update(FAKE_HARNESS_MISSING=1, NSPY_TUTORIAL_TEST_VENV=tmp_path / "venv")
    status, output, asked = run_script(script, tmp_path, *SCRIPTS[script], **settings)
    assert status == 2 and named in output and "Set PYTHON to" in output, f"name {named!r} and the fix:\n{output}"
    assert (version or "").startswith(f"3.{FLOOR - 1}") == ("needs Python" in output), f"old or unusable?\n{output}"
    assert not [line for line in asked if line.startswith("-m")] and not pip_installs(tmp_path), asked
    assert not (tmp_path / "venv").exists(), "a refused Python must change nothing"


def test_a_python_that_hangs_is_refused_with_a_reason(tmp_path):
    python = hanging_command(tmp_path / "python3")
    code = f'refuse() {{ echo "refused: $*"; exit 2; }}; source {ROOT}/scripts/settings.bash; PYTHON_ANSWER_S=1; '
    command = ["bash", "-c", code + 'check_python "$1" WHO', "bash", str(python)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"refused: PYTHON={python} did not answer within 1 s" in done.stdout, done.stdout


def test_a_warning_python_prints_on_stderr_never_becomes_part_of_a_folder_setting(tmp_path):
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\necho 'Warning: a noisy site' >&2\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    code = f'refuse() {{ echo "refused: $*"; exit 2; }}; repo={ROOT}; source {ROOT}/scripts/settings.bash; '
    for value, said in (("runs/out", f"folder={tmp_path / 'runs/out'}"), ("~nspy_no_such_user/x", "refused: S: ")):
        command = ["bash", "-c", code + 'absolute_folder "$1" S "$2" && echo "folder=$REPLY"', "bash", python, value]
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.stdout.strip().startswith(said) and "Warning" in done.stderr, f"{value}: {done.stdout}"
        assert "Warning" not in done.stdout, "stderr is no part of the folder or of the refusal"
