"""The headless GPU run: nbmake executes a copy of the notebook on a real NVIDIA GPU, then summary.json is checked.

The copy allows errors (its metadata.execution.allow_errors, which nbmake reads), so every cell runs and the
summary cell writes summary.json; then plumbing/executed_run.py marks each section with an error output FAILED,
with its first error, in summary.json. Strict: a FAILED or NOT RUN section, a SUSPECT figure or an error outside
the sections fails the run.

Select it with `pytest -m gpu tests/test_notebook_gpu.py` (scripts/run_headless does). It is skipped,
with a reason, where there is no NVIDIA GPU. On a GPU machine a missing harness piece (nbmake, the
python3 kernel spec) is a failure, not a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import NOTEBOOK, copy_allowing_errors, gpu_listing, section_problems

from plumbing.cells import SECTION_COUNT
from plumbing.executed_run import finish_run, run_problems
from plumbing.harness import choose_output_dir

pytestmark = pytest.mark.gpu
EXPECTED_SECTIONS = list(range(1, SECTION_COUNT + 1))


@pytest.fixture(scope="module")
def run_dir() -> Path:
    # NSPY_TUTORIAL_OUT, else the notebook's own default folder (run from the clone, as run_headless does)
    return choose_output_dir(os.environ, on_colab=False)  # made once the run is sure to happen


def require_harness() -> None:
    """On a GPU machine the harness must be complete: say what to install instead of skipping."""
    missing = [name for name in ("nbmake", "ipykernel", "nbclient") if not _importable(name)]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: pip install -r requirements-harness.txt", pytrace=False)
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        pytest.fail("no 'python3' kernel spec: run python3 -m ipykernel install --user --name python3", pytrace=False)


def cell_timeout_s(environ=os.environ) -> int:
    """NSPY_TUTORIAL_CELL_TIMEOUT: seconds one cell may take (default 900)."""
    given = environ.get("NSPY_TUTORIAL_CELL_TIMEOUT", "").strip() or "900"
    if not given.isdigit() or int(given) == 0:
        pytest.fail(
            f"NSPY_TUTORIAL_CELL_TIMEOUT={given!r} is not a whole number of seconds above 0: set it to one "
            "(the seconds one notebook cell may take), or unset it for 900.",
            pytrace=False,
        )
    return int(given)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def executed(run_dir: Path) -> dict:
    if not gpu_listing():
        pytest.skip("no NVIDIA GPU here (nvidia-smi lists none): the notebook run needs one")
    require_harness()
    timeout_s = cell_timeout_s()
    run_dir.mkdir(parents=True, exist_ok=True)
    copy = run_dir / NOTEBOOK.name
    copy_allowing_errors(NOTEBOOK, copy)  # nbmake --overwrite writes outputs into this copy, never the committed one
    summary_path = run_dir / "summary.json"
    summary_path.unlink(missing_ok=True)
    env = dict(os.environ, NSPY_TUTORIAL_OUT=str(run_dir))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(run_dir), "-o", "addopts=",
               "--nbmake", f"--nbmake-timeout={timeout_s}", "--overwrite", str(copy)]  # fmt: skip
    done = subprocess.run(command, cwd=run_dir, env=env, capture_output=True, text=True)
    (run_dir / "nbmake.log").write_text(done.stdout + done.stderr)
    summary = finish_run(copy, summary_path) if copy.exists() else None
    return {"returncode": done.returncode, "log": done.stdout + done.stderr, "summary": summary}


def test_nbmake_executed_the_whole_notebook(executed):
    assert executed["returncode"] == 0 and executed["summary"] is not None, (
        "nbmake did not execute the whole notebook (a cell ran past NSPY_TUTORIAL_CELL_TIMEOUT, or the kernel "
        f"died); see nbmake.log and the executed notebook. Tail:\n{executed['log'][-4000:]}"
    )


def test_the_run_is_clean(executed):
    problems = run_problems(executed["summary"])
    assert not problems, "the run is not clean (summary.json and the executed notebook):\n- " + ("\n- ".join(problems))


def test_summary_names_a_gpu_and_every_section(executed):
    summary = executed["summary"]
    assert summary.get("summary_written", True), "the notebook wrote no summary.json: did it reach its Summary cell?"
    assert summary["environment"].get("gpu"), "summary.json's environment block names no GPU"
    assert [s["number"] for s in summary["sections"]] == EXPECTED_SECTIONS


def test_sections_run_or_skip_exactly_as_the_backend_requires(executed):
    problems = section_problems(executed["summary"])
    assert not problems, "sections not as the backend requires:\n" + "\n".join(problems)


def test_no_headline_figure_is_suspect(executed):
    summary = executed["summary"]
    suspect = [f for f in summary["figures"] if f["check"] == "SUSPECT"]
    assert not suspect, f"figures outside the GPU's physical limits: {suspect}"
