"""Edges a careless one-line edit once crossed without a test failing (issue 45; the datasheet's GPU names are in
test_harness.py): the probe's time limit, ~user paths, the Colab badges, the suite's own plugins."""

import json
import os
import pwd
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from evidence import VERIFIED
from fakes import requirement_pins
from support import NOTEBOOK, ROOT

from plumbing import folders, setup_helpers


def test_the_probe_waits_ten_times_the_slowest_profiled_call_the_runner_recorded():
    """A probe is one profiled call of a tiny kernel: a cold machine may be far slower than the runner was."""
    logs = [path.read_text() for path in VERIFIED.glob("*/ncu_launch.log")]
    seconds = [float(s) for log in logs for s in re.findall(r"ncu exit \d+ in ([\d.]+) s", log)]
    if not seconds:
        pytest.skip("no committed ncu_launch.log (a launch-mode run) times an ncu call")
    limit = setup_helpers.TIME_LIMITS_S["probe"]
    assert limit >= 10 * max(seconds), f"the probe's {limit} s is short of ten times {max(seconds)} s"


def test_a_home_folder_of_a_named_user_is_expanded_with_the_rest_of_the_path():  # settings.bash: test_settings_bash
    user = pwd.getpwuid(os.getuid())
    assert folders.folder_setting("S", f"~{user.pw_name}/a/b", "fix") == Path(user.pw_dir, "a", "b")


def colab_badge(text: str) -> str:
    (found,) = set(re.findall(r"https://colab\.research\.google\.com/github/([^\"')\s]+)", text))
    return found


def test_readmes_colab_badge_opens_the_notebook_that_the_notebooks_own_badge_opens():
    first_cell = "".join(json.loads(NOTEBOOK.read_text())["cells"][0]["source"])
    readme, notebook = colab_badge((ROOT / "README.md").read_text()), colab_badge(first_cell)
    assert readme == notebook, f"README opens {readme}, the notebook's badge {notebook}: one branch and path for both"
    assert readme.endswith(f"/{NOTEBOOK.name}"), f"the badge opens {readme}, not the notebook"


def run_tests_pytest_options() -> list[str]:
    """The options scripts/run_tests gives pytest, and pyproject.toml's addopts."""
    given = re.search(r'^"\$venv/bin/python" -m pytest (.*) "\$@"', (ROOT / "scripts/run_tests").read_text(), re.M)
    assert given, "scripts/run_tests no longer runs pytest as this test reads it: update run_tests_pytest_options"
    addopts = re.search(r'^addopts = "(.*)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    return [*given.group(1).split(), *addopts.replace("'not gpu'", "not_gpu").split()]


def test_dev_requirements_hold_every_plugin_the_suites_command_line_needs(tmp_path):
    listed = set(requirement_pins(ROOT / "requirements-dev.txt"))
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    for plugin in entry_points(group="pytest11"):
        without = [sys.executable, "-m", "pytest", "-p", f"no:{plugin.name}", *run_tests_pytest_options(), "--co"]
        done = subprocess.run([*without, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
        needed = "unrecognized arguments" in done.stderr
        assert not needed or plugin.dist.name.lower() in listed, f"requirements-dev.txt lacks {plugin.dist.name}"
