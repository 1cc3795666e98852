"""The headless verdict (plumbing/executed_run.py, and the backend rule the GPU test applies)."""

import json
import os
import re
import shutil
import subprocess
import sys

import evidence
import nbformat
import pytest
from fakes import fresh_clone, nvidia_smi
from support import NOTEBOOK, ROOT, WITHOUT_MODULES, run_allowing_errors

from plumbing.cells import NCU_ONLY_SECTIONS, SECTION_PLAN, SUMMARY
from plumbing.executed_run import OUTPUT_LIMIT, merge_failures, printed_lines, run_problems

S2_RUN, S3_RUN = SECTION_PLAN[2]["run"][0], SECTION_PLAN[3]["run"][0]
BROKEN_RUN = {  # cells of a run with errors, under the notebook's own ids (s2-tflops: a made-up one of section 2)
    "s1-verdict": "print('On this Tesla T4: set up')",
    SECTION_PLAN[2]["define"][-1]: "section = 2",
    S2_RUN: "1 / 0",  # section 2's first error
    "s2-tflops": "first_row['AvgValue']",  # a NameError that follows from it: not the cause
    # section 3 prints its verdict in colour, then shows (does not print) a text that reads like one
    S3_RUN: "import time\ntime.sleep(0.2)\nprint('section 3 ran')\nprint('\\x1b[31mOn this Tesla T4: the add spread')\n"
    "display({'text/plain': 'On this Tesla T4: shown, not printed'}, raw=True)",
    "s4-run": "print('Skipped: this cell needs Nsight Compute, and this runtime measures with CUPTI.')",
    SECTION_PLAN[5]["define"][0]: "def broken(:\n    pass",
    SECTION_PLAN[8]["run"][0]: "import sys\nsys.exit(2)",
    "my-own-cell": "{}['x']",  # a cell the table does not know: outside the sections, its error reported
    SUMMARY: "report_summary()",  # a later error outside the sections
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("run")
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    notebook.cells = [nbformat.v4.new_code_cell(source, id=cell_id) for cell_id, source in BROKEN_RUN.items()]
    (folder / "source.ipynb").write_text(nbformat.writes(notebook))
    returncode, log = run_allowing_errors(folder / "source.ipynb", folder / "executed.ipynb", 120)
    assert returncode == 0, f"nbmake must run every cell of a copy that allows errors:\n{log[-3000:]}"
    return json.loads((folder / "executed.ipynb").read_text())


def _statuses(summary):
    return {section["number"]: section["status"] for section in summary["sections"]}


def test_the_committed_cupti_run_keeps_its_statuses_and_verdicts_and_is_clean():
    folder = evidence.run_with("s2_summed")
    notebook = json.loads((folder / evidence.EXECUTED).read_text())
    merged = merge_failures(json.loads((folder / "summary.json").read_text()), notebook)
    assert _statuses(merged) == {n: "SKIPPED" if n in NCU_ONLY_SECTIONS else "ok" for n in range(1, 11)}
    assert run_problems(merged) == [], "a clean real run must have no problems"
    lines = [line for cell in notebook["cells"] for line in printed_lines(cell)]
    said = [line for line in lines if line.startswith(f"On this {evidence.gpu(folder)}: ")]
    headlines = "\n".join(section["headline"] for section in merged["sections"])
    assert said and all(line in headlines for line in said), "every verdict printed is its section's headline"
    assert all(section["headline"] for section in merged["sections"] if section["status"] == "ok")


def test_each_section_is_judged_by_what_its_cells_printed_and_its_first_error(executed):
    assert "section 3 ran" in json.dumps(executed["cells"][4]["outputs"]), "a cell after an error must still run"
    figure = dict(section=6, name="x", value=900.0, unit="GB/s", check="SUSPECT", pct_of_peak=281.2, peak=320.0)
    summary = {"environment": {"gpu": "T4"}, "figures": [figure], "sections": [{"number": 3, "files": ["s3/a.csv"]}]}
    before = json.dumps(summary)
    merged = merge_failures(summary, executed)
    assert json.dumps(summary) == before, "the summary read from disk must not be changed in place"
    by_number = {section["number"]: section for section in merged["sections"]}
    cell_s = {cell["cell"]: cell["seconds"] for cell in merged["cells"]}  # each cell's time, as nbmake recorded it
    assert by_number[3]["seconds"] == round(cell_s[S3_RUN], 2) >= 0.2, "a section's time is its cells' time"
    assert by_number[2]["reason"] == f"ZeroDivisionError: division by zero (cell {S2_RUN})", "its FIRST error"
    assert by_number[5]["reason"].startswith("SyntaxError") and by_number[8]["reason"].startswith("SystemExit: 2")
    expected = {1: "ok", 2: "FAILED", 3: "ok", 4: "SKIPPED", 5: "FAILED", 8: "FAILED"}
    assert _statuses(merged) == {n: expected.get(n, "NOT RUN") for n in range(1, 11)}
    assert (by_number[3]["headline"], by_number[3]["files"]) == ("On this Tesla T4: the add spread", ["s3/a.csv"])
    assert merged["counts"] == {"ok": 2, "SKIPPED": 1, "FAILED": 3, "NOT RUN": 4} and merged["suspect_figures"] == 1
    problems = run_problems(merged)
    in_sections = [f"section {n} {by_number[n]['status']}: {by_number[n]['reason']}" for n in (2, 5, 6, 7, 8, 9, 10)]
    assert problems[:-2] == in_sections and "it printed no verdict" in in_sections[2], problems
    assert problems[-2] == "SUSPECT figure in section 6: x = 900.0 GB/s (281.2% of peak 320.0)", problems
    assert problems[-1] == "cell my-own-cell: KeyError: 'x'", "the first error outside the sections is reported"
    assert {cell["cell"]: cell["section"] for cell in merged["cells"]}[SUMMARY] is None, "outside the sections"


S2_DEFINE = SECTION_PLAN[2]["define"][-1]
PRINTS = "print('profiling the product', flush=True)\n"  # what section 2's run cell prints before it fails
FAILS_IN_ONE_CELL = {  # how it goes on after PRINTS, the cell timeout, each cell's status
    "raises": ("print('.' * 9000)\nraise RuntimeError('the profiler stopped')", 60, ("ok", "error", "ok")),
    "runs past its timeout": ("import time\ntime.sleep(60)", 3, ("ok", "unfinished", "not run")),
}


@pytest.mark.parametrize("failure", FAILS_IN_ONE_CELL)
def test_a_failed_headless_run_names_each_cells_time_and_shows_the_failing_cells_outputs(tmp_path, failure):
    """The GPU test itself (tests/test_notebook_gpu.py), run by pytest as run_headless runs it, in a clone whose
    notebook is a small run that fails in one cell, in a real kernel, on a machine whose nvidia-smi lists a GPU."""
    goes_on, timeout_s, statuses = FAILS_IN_ONE_CELL[failure]
    cells = {S2_DEFINE: "import time\ntime.sleep(0.5)", S2_RUN: PRINTS + goes_on, S3_RUN: "print('section 3 ran')"}
    clone = fresh_clone(tmp_path / "clone")
    shutil.copytree(ROOT / "tests", clone / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", clone / "pyproject.toml")
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    notebook.cells = [nbformat.v4.new_code_cell(source, id=cell_id) for cell_id, source in cells.items()]
    (clone / NOTEBOOK.name).write_text(nbformat.writes(notebook))
    nvidia_smi(tmp_path / "bin", "NVIDIA H200")
    env = dict(os.environ, NSPY_TUTORIAL_OUT=str(tmp_path / "out"), NSPY_TUTORIAL_CELL_TIMEOUT=str(timeout_s))
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/test_notebook_gpu.py", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 1, f"the GPU test must fail a run that fails in a cell:\n{output[-3000:]}"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())  # the notebook wrote none: finish_run's
    assert (summary["summary_written"], summary["figures"], len(summary["sections"])) == (False, [], 10), summary
    ran = [(cell["cell"], cell["status"]) for cell in summary["cells"]]
    assert ran == list(zip(cells, statuses, strict=True)), summary
    for cell, status in zip(summary["cells"], statuses, strict=True):
        seconds = r"\d+\.\d\d s" if status in ("ok", "error") else "-"
        shown = rf"{re.escape(cell['cell'])}\s+section\s+\d+\s+{seconds}\s+{status}"
        assert re.search(shown, output), f"pytest's output must give {cell['cell']}'s time and status:\n{output}"
    assert summary["cells"][0]["seconds"] >= 0.5, "the time must be the cell's own"
    (failing,) = summary["failing_cells"]
    assert failing["cell"] == S2_RUN and "profiling the product" in failing["outputs"], failing
    said = "RuntimeError: the profiler stopped" if failure == "raises" else "profiling the product"
    assert said in failing["outputs"] and f"outputs of cell {S2_RUN}" in output and said in output, output
    assert "\x1b[" not in failing["outputs"], "a traceback's colour codes make summary.json hard to read"
    assert len(failing["outputs"]) < OUTPUT_LIMIT + 100, "a cell's outputs must be cut to their end, not kept whole"


def test_the_verdict_module_imports_in_a_python_without_torch_nsight_or_jupyter(tmp_path):
    """run_headless's pytest judges the run after the kernel is gone, in a Python that may lack the notebook's own."""
    absent = ("torch", "nsight", "numpy", "pandas", "IPython", "nbformat")
    script = tmp_path / "judge.py"
    script.write_text("import plumbing.executed_run\nprint('imported')\n")
    blocker, env = WITHOUT_MODULES.format(absent=absent), dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", blocker, str(script)], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "imported", f"plumbing/executed_run.py must import without {absent}:\n{done.stderr}"
