"""The headless GPU run (scripts/run_headless): nbmake runs every cell, plumbing/executed_run.py judges it."""

import json
import os
import subprocess

import pytest
from support import NOTEBOOK, run_allowing_errors

from plumbing.cells import NCU_ONLY_SECTIONS, SECTION_COUNT
from plumbing.executed_run import finish_run, run_problems, run_report
from plumbing.harness import choose_output_dir

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def executed() -> dict:
    if "GPU" not in subprocess.run("nvidia-smi -L", shell=True, capture_output=True, text=True).stdout:
        pytest.skip("no NVIDIA GPU here (nvidia-smi lists none): the notebook run needs one")
    timeout_s = int(os.environ.get("NSPY_TUTORIAL_CELL_TIMEOUT") or 900)  # run_headless checks it, installs nbmake
    run_dir = choose_output_dir(os.environ, on_colab=False)  # NSPY_TUTORIAL_OUT, else the notebook's default
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").unlink(missing_ok=True)
    returncode, log = run_allowing_errors(NOTEBOOK, run_dir / NOTEBOOK.name, timeout_s)
    (run_dir / "nbmake.log").write_text(log)
    copy = run_dir / NOTEBOOK.name
    summary = finish_run(copy, run_dir / "summary.json") if copy.exists() else None
    where = run_report(summary) if summary else f"no executed notebook was written in {run_dir}"
    return {"returncode": returncode, "log": log, "summary": summary, "where": where, "copy": copy}


def test_nbmake_executed_the_whole_notebook(executed):
    tail = executed["log"][-4000:]  # a cell ran past NSPY_TUTORIAL_CELL_TIMEOUT, or the kernel died
    assert executed["returncode"] == 0 and executed["summary"] is not None, (
        f"{executed['where']}\nsee nbmake.log; its tail:\n{tail}"
    )


def test_the_run_is_clean_and_every_section_run_or_skipped_as_the_backend_requires(executed):
    summary = executed["summary"]
    problems = run_problems(summary)  # FAILED or NOT RUN sections, SUSPECT figures, errors outside
    assert not problems, (
        f"{executed['where']}\nthe run is not clean (summary.json and the executed notebook):\n- "
        + "\n- ".join(problems)
    )
    assert summary.get("summary_written", True), "the notebook wrote no summary.json: did it reach its Summary cell?"
    assert summary["environment"].get("gpu"), "summary.json's environment block names no GPU"
    assert [s["number"] for s in summary["sections"]] == list(range(1, SECTION_COUNT + 1))
    profiler = summary["environment"].get("profiler")
    skipped = {s["number"] for s in summary["sections"] if s["status"] == "SKIPPED"}  # an ncu-only one under CUPTI
    assert profiler in ("ncu", "cupti") and skipped == (NCU_ONLY_SECTIONS if profiler == "cupti" else set()), profiler


def test_every_picture_the_run_drew_carries_alt_text_and_sections_3_and_8_drew_one(executed):
    pictures = {}  # cell id -> the alt text of each PNG it showed
    for cell in json.loads(executed["copy"].read_text())["cells"]:
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                alt = output.get("metadata", {}).get("image/png", {}).get("alt", "")
                pictures.setdefault(cell["id"], []).append(alt)
    assert {"s3-run", "s8-plot"} <= set(pictures), f"the run drew in {sorted(pictures)}"
    assert all(all(alts) for alts in pictures.values()), f"a picture without alt text: {pictures}"
