"""The headless GPU run: nbmake executes the notebook on a real NVIDIA GPU, then summary.json is checked.

Select it with `pytest -m gpu tests/test_notebook_gpu.py` (scripts/run_headless does). It is skipped,
with a reason, where there is no NVIDIA GPU. On a GPU machine a missing harness piece (nbmake, the
python3 kernel spec) is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import NOTEBOOK, ROOT, gpu_listing, load_json, section_problems

from plumbing.cells import SECTION_COUNT

pytestmark = pytest.mark.gpu
CELL_TIMEOUT_S = int(os.environ.get("NSPY_TUTORIAL_CELL_TIMEOUT", "900"))
EXPECTED_SECTIONS = list(range(1, SECTION_COUNT + 1))


@pytest.fixture(scope="module")
def run_dir() -> Path:
    folder = Path(os.environ.get("NSPY_TUTORIAL_OUT") or ROOT / "headless_run").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def executed(run_dir: Path) -> dict:
    if not gpu_listing():
        pytest.skip("no NVIDIA GPU here (nvidia-smi lists none): the notebook run needs one")
    require_harness()
    copy = run_dir / NOTEBOOK.name
    shutil.copyfile(NOTEBOOK, copy)  # nbmake --overwrite writes outputs into this copy, never the committed one
    summary_path = run_dir / "summary.json"
    summary_path.unlink(missing_ok=True)
    env = dict(os.environ, NSPY_TUTORIAL_STRICT="1", NSPY_TUTORIAL_OUT=str(run_dir))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(run_dir), "-o", "addopts=",
               "--nbmake", f"--nbmake-timeout={CELL_TIMEOUT_S}", "--overwrite", str(copy)]  # fmt: skip
    done = subprocess.run(command, cwd=run_dir, env=env, capture_output=True, text=True)
    (run_dir / "nbmake.log").write_text(done.stdout + done.stderr)
    return {"returncode": done.returncode, "log": done.stdout + done.stderr, "summary_path": summary_path}


def test_notebook_runs_without_cell_error_under_strict_mode(executed):
    assert executed["returncode"] == 0, (
        "nbmake reported a failing cell (strict mode fails on a FAILED section or SUSPECT figure); "
        f"see nbmake.log and the executed notebook. Tail:\n{executed['log'][-4000:]}"
    )


def test_summary_names_a_gpu_and_every_section(executed):
    assert executed["summary_path"].exists(), "the notebook wrote no summary.json: did it reach its Summary cell?"
    summary = load_json(executed["summary_path"])
    assert summary["environment"].get("gpu"), "summary.json's environment block names no GPU"
    assert [s["number"] for s in summary["sections"]] == EXPECTED_SECTIONS


def test_sections_run_or_skip_exactly_as_the_backend_requires(executed):
    problems = section_problems(load_json(executed["summary_path"]))
    assert not problems, "sections not as the backend requires:\n" + "\n".join(problems)


def test_no_headline_figure_is_suspect(executed):
    summary = load_json(executed["summary_path"])
    suspect = [f for f in summary["figures"] if f["check"] == "SUSPECT"]
    assert not suspect, f"figures outside the GPU's physical limits: {suspect}"
