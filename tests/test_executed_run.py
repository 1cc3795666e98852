"""The headless run's section status from the executed notebook (plumbing/executed_run.py), on real executions.

The GPU test executes a copy of the notebook with errors allowed, then marks each section whose cell left an error
output FAILED in summary.json. Here: the committed CUPTI run (a real executed notebook from the H200 runner) must
keep its statuses, and notebooks executed for real in a kernel here, with the notebook's own cell ids and cells
that raise, must give FAILED exactly to the sections that raised, with each one's first error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
from kernel_session import ipc_config
from nbclient import NotebookClient
from support import ROOT, copy_allowing_errors
from support import load_json as load

from plumbing.cells import GPU_CHECK, SECTION_PLAN, SUMMARY
from plumbing.executed_run import finish_run, first_errors, merge_failures, run_problems

CUPTI_RUN = ROOT / "docs" / "verified" / "nvidia-h200-cupti"
(S2_RUN,), (S3_RUN, S3_LATER) = SECTION_PLAN[2]["run"], SECTION_PLAN[3]["run"]
BROKEN_RUN = {  # cells of a run with errors, under the notebook's own ids (s2-tflops: a made-up one of section 2)
    SECTION_PLAN[2]["define"][-1]: "section = 2",
    S2_RUN: "1 / 0",  # section 2's first error
    "s2-tflops": "first_row['AvgValue']",  # a NameError that follows from it: not the cause
    S3_RUN: "x = 3",
    SECTION_PLAN[5]["define"][0]: "def broken(:\n    pass",
    SECTION_PLAN[8]["run"][0]: "import sys\nsys.exit(2)",
    SUMMARY: "report_summary()",  # an error outside the sections
}


def executed_here(tmp_path, cells: dict[str, str]) -> dict:
    """A notebook of these cells executed for real with nbclient, errors allowed, as the executed copy reads."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source, id=cell_id) for cell_id, source in cells.items()]
    NotebookClient(
        notebook, kernel_name="python3", allow_errors=True, timeout=120, config=ipc_config(tmp_path)
    ).execute()
    return json.loads(nbformat.writes(notebook))


def test_the_committed_cupti_run_keeps_its_statuses_and_is_clean():
    merged = merge_failures(load(CUPTI_RUN / "summary.json"), load(CUPTI_RUN / "nsight_python_t4_tutorial.ipynb"))
    statuses = {section["number"]: section["status"] for section in merged["sections"]}
    assert statuses == {1: "ok", 2: "ok", 3: "ok", 4: "SKIPPED", 5: "ok", 6: "SKIPPED", 7: "SKIPPED", 8: "ok",
                        9: "SKIPPED", 10: "SKIPPED"}  # fmt: skip
    assert merged["counts"] == {"ok": 5, "SKIPPED": 5, "FAILED": 0, "NOT RUN": 0}
    assert run_problems(merged) == [], "a clean real run must have no problems"


def test_each_section_that_raised_is_failed_with_its_first_error_and_the_others_stay(tmp_path):
    executed = executed_here(tmp_path, BROKEN_RUN)
    merged = merge_failures(load(CUPTI_RUN / "summary.json"), executed)
    by_number = {section["number"]: section for section in merged["sections"]}
    assert by_number[2]["status"] == "FAILED"
    assert by_number[2]["reason"] == f"ZeroDivisionError: division by zero (cell {S2_RUN})", (
        "a FAILED section names its FIRST error and the cell it came from, not a later one that follows from it"
    )
    assert by_number[5]["status"] == "FAILED" and by_number[5]["reason"].startswith("SyntaxError")
    assert by_number[8]["status"] == "FAILED" and by_number[8]["reason"].startswith("SystemExit: 2")
    unchanged = {n: by_number[n]["status"] for n in (1, 3, 4, 6, 7, 9, 10)}
    assert unchanged == {1: "ok", 3: "ok", 4: "SKIPPED", 6: "SKIPPED", 7: "SKIPPED", 9: "SKIPPED", 10: "SKIPPED"}
    assert merged["counts"] == {"ok": 2, "SKIPPED": 5, "FAILED": 3, "NOT RUN": 0}
    problems = run_problems(merged)
    assert any(problem.startswith("section 2 FAILED: ZeroDivisionError") for problem in problems), problems
    assert f"cell {SUMMARY}: NameError: name 'report_summary' is not defined" in problems, (
        "an error in the summary cell is an error outside the sections and fails the run"
    )


def test_a_section_fixed_and_run_again_is_judged_by_the_new_run_only(tmp_path):
    fixed = {**BROKEN_RUN, S2_RUN: "1 / 1", "s2-tflops": "2"}
    merged = merge_failures(load(CUPTI_RUN / "summary.json"), executed_here(tmp_path, fixed))
    assert merged["sections"][1]["status"] == "ok", "an executed copy without an error in section 2 leaves it as run"


def test_a_run_that_wrote_no_summary_still_names_every_section(tmp_path):
    executed = tmp_path / "executed.ipynb"
    executed.write_text(json.dumps(executed_here(tmp_path, {GPU_CHECK: "raise RuntimeError('No NVIDIA GPU')"})))
    summary_path = tmp_path / "summary.json"
    merged = finish_run(executed, summary_path)
    assert load(summary_path) == merged, "summary.json is rewritten with the merged statuses"
    statuses = [section["status"] for section in merged["sections"]]
    assert statuses == ["FAILED"] + ["NOT RUN"] * 9, statuses
    assert merged["sections"][0]["reason"] == f"RuntimeError: No NVIDIA GPU (cell {GPU_CHECK})"
    assert "no summary.json" in merged["sections"][1]["reason"]


def test_an_error_in_a_cell_the_table_does_not_know_is_reported_not_dropped():
    notebook = {"cells": [{"cell_type": "code", "id": "my-own-cell", "source": "1/0",
                           "outputs": [{"output_type": "error", "ename": "ZeroDivisionError",
                                        "evalue": "division by zero", "traceback": []}]}]}  # fmt: skip
    assert first_errors(notebook) == {None: {"cell": "my-own-cell", "error": "ZeroDivisionError: division by zero"}}


def test_nbmake_runs_every_cell_of_a_copy_that_allows_errors(tmp_path):
    """The GPU test's own copy and nbmake command: a raising cell does not stop the run or fail nbmake."""
    source = tmp_path / "source.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(code, id=cell_id) for cell_id, code in
                      {S2_RUN: "1 / 0", S3_RUN: "print('section 3 ran')"}.items()]  # fmt: skip
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source.write_text(nbformat.writes(notebook))
    copy = tmp_path / "run" / "executed.ipynb"
    copy.parent.mkdir()
    copy_allowing_errors(source, copy)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(copy.parent), "-o",
               "addopts=", "--nbmake", "--nbmake-timeout=120", "--overwrite", str(copy)]  # fmt: skip
    done = subprocess.run(command, cwd=copy.parent, capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    merged = merge_failures(None, load(copy))
    assert merged["sections"][1]["status"] == "FAILED", "the error output must be in the executed copy"
    outputs = load(copy)["cells"][1]["outputs"]
    assert outputs and "section 3 ran" in "".join(outputs[0]["text"]), "the cell after the error must have run"


def _error_cell(cell_id, *errors):
    outputs = [{"output_type": "stream", "name": "stdout", "text": "printed first\n"}]
    outputs += [{"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []} for ename, evalue in errors]
    return {"cell_type": "code", "id": cell_id, "source": "", "outputs": outputs}


def test_the_first_error_of_a_section_and_outside_the_sections_is_kept_not_a_later_one():
    notebook = {
        "cells": [
            _error_cell(S3_RUN, ("ValueError", "the first one\nmore detail"), ("KeyError", "a second output")),
            _error_cell(S3_LATER, ("NameError", "name 'means' is not defined")),
            _error_cell("my-cell", ("ZeroDivisionError", "division by zero")),
            _error_cell("my-other-cell", ("TypeError", "later")),
        ]
    }
    summary = load(CUPTI_RUN / "summary.json")
    before = json.dumps(summary)
    merged = merge_failures(summary, notebook)
    assert merged["sections"][2]["reason"] == f"ValueError: the first one (cell {S3_RUN})", merged["sections"][2]
    assert merged["errors_outside_sections"] == [{"cell": "my-cell", "error": "ZeroDivisionError: division by zero"}]
    assert json.dumps(summary) == before, "the summary read from disk must not be changed in place"
    assert merged["counts"]["FAILED"] == 1 and merged["suspect_figures"] == 0
