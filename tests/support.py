"""What several test modules share: the repository's paths, the notebook's cells by id, and a real kernel that runs
the notebook's own cells on a recording (no test module imports another)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import recordings
from kernel_session import KernelSession

from plumbing.cells import HARNESS, NCU_ONLY_SECTIONS, SECTION_PLAN, reads_report_folders, section_of

RUN = {number: plan["run"][0] for number, plan in SECTION_PLAN.items()}  # each section's (first) run cell

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "nsight_python_t4_tutorial.ipynb"
# Runs a script (argv[1]) as `python script.py` would (its folder first on the child's import path), in a Python
# that cannot import the modules named in `absent` (str.format it first).
WITHOUT_MODULES = """import os, runpy, sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {absent!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""
RERECORD = (
    "re-record that section on the GPU runner (README: Re-recording the Nsight Compute data; --sections N records "
    "only it), then python scripts/render_recorded.py, and commit the folder"
)


# The Unit column's scales, to seconds and bytes (percentages stay percentages): the tests' own table, not the
# harness's, so that a wrong factor there is caught by a test rather than shared with it.
TO_BASE = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
           "second": 1.0, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "%": 1.0}  # fmt: skip


def frame_rows(recorded, frame: str, regions: int, metrics: int) -> dict:
    """{(annotation, metric): AvgValue in seconds, bytes or %} of a frame a run cell bound, one row each."""
    records = recorded.value(f"{frame}[['Annotation', 'Metric', 'AvgValue', 'Unit']].to_dict(orient='records')")
    keys = [(r["Annotation"], r["Metric"]) for r in records]
    assert len(keys) == len(set(keys)) == regions * metrics, (
        f"{frame} should hold {regions} regions x {metrics} metrics, one row each: {keys}"
    )
    assert all(r["Unit"] in TO_BASE for r in records), f"a unit this test cannot scale: {records}"
    return {(r["Annotation"], r["Metric"]): r["AvgValue"] * TO_BASE[r["Unit"]] for r in records}


def gpu_listing() -> str:
    """What `nvidia-smi -L` lists, or '' when there is no NVIDIA GPU (or no driver)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 and "GPU" in done.stdout else ""


def ncu_namespace(*cell_ids: str, **names) -> dict:
    """A namespace as Run all on Nsight Compute leaves it for a section's cells, in this process: the shared cells of
    the recording plan (the harness, the setup helpers, the define cells later sections use), then `cell_ids`.
    `names` stand in for what section 1 would have bound (ENVIRONMENT, L2_BYTES, ...), kept over every cell."""
    import nsight

    cells = recordings.load_cells()
    namespace = {"__name__": "__main__", "nsight": nsight, "QUIET": nsight.VerbosityLevel.SILENT, "USE_NCU": True}
    for cell_id in (*recordings.prelude_cell_ids(cells), *cell_ids):
        namespace.update(names)
        recordings.run_cell(namespace, recordings.cell_source(cells, cell_id), cell_id, echo=False)
    return namespace


def cell_by_id(nb: nbformat.NotebookNode, cell_id: str) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            return cell
    raise AssertionError(f"the notebook has no cell with id {cell_id!r}; tests address cells by id")


def cells_with_section(nb: nbformat.NotebookNode):
    """(section number or None, cell) for every cell, by the cell table in plumbing/cells.py."""
    for cell in nb.cells:
        yield section_of(cell.get("id")), cell


def section_code_cells(nb: nbformat.NotebookNode, number: int) -> list[nbformat.NotebookNode]:
    """The code cells of section `number`, in order."""
    return [cell for section, cell in cells_with_section(nb) if section == number and cell.cell_type == "code"]


def copy_allowing_errors(notebook: Path, copy: Path) -> None:
    """The notebook with errors allowed (nbmake reads metadata.execution.allow_errors): every cell runs."""
    content = json.loads(notebook.read_text())
    content["metadata"]["execution"] = {"allow_errors": True}
    copy.write_text(json.dumps(content, indent=1) + "\n")


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())


def section_problems(summary: dict) -> list[str]:
    """Sections whose status the backend does not allow.

    Under CUPTI exactly the sections that need Nsight Compute (plumbing/cells.py) are SKIPPED, for a declared
    environment limit; under Nsight Compute none is. So a section that quietly became SKIPPED fails the run.
    """
    profiler = summary["environment"].get("profiler")
    if profiler not in ("ncu", "cupti"):
        return [f"summary.json names no backend (environment.profiler = {profiler!r})"]
    skipped_by_design = NCU_ONLY_SECTIONS if profiler == "cupti" else set()
    problems = []
    for section in summary["sections"]:
        expected = "SKIPPED" if section["number"] in skipped_by_design else "ok"
        if section["status"] != expected or (expected == "SKIPPED" and not section["environment_limit"]):
            problems.append(
                f"section {section['number']}: {section['status']} {section['reason']} "
                f"(expected {expected} under {profiler})"
            )
    return problems


class RecordedNotebook:
    """A kernel with the harness, section 1's names from a recording, and the shared define cells; then, on demand,
    a section: its own cells in notebook order, each run cell replaced by the values it bound on the GPU machine."""

    def __init__(self, notebook, folder, tmp_path):
        self.notebook, self.folder, self.out = notebook, folder, tmp_path / "out"
        self.recording = recordings.load_recording(folder)
        self.cells = recordings.load_cells()
        self.session = KernelSession(
            env={"NSPY_TUTORIAL_OUT": str(self.out), "MPLBACKEND": "Agg", "NSPY_NCU_INIT_AT_IMPORT": "0"},
            cwd=tmp_path,
        )
        try:
            self.session.run(cell_by_id(notebook, HARNESS).source)
            self.session.run(recordings.cpu_section_one_source(folder))
            for cell_id in recordings.prelude_cell_ids(self.cells)[1:]:
                self.session.run(cell_by_id(notebook, cell_id).source)
        except BaseException:
            self.session.close()  # a kernel never outlives a failed set-up
            raise
        self.outputs: dict[int, str] = {}

    def section(self, number: int) -> str:
        """Run section `number` on the recording; fail, naming the section's cells, unless it ends ok."""
        if number in self.outputs:
            return self.outputs[number]
        if reads_report_folders(number):  # the files it reads, as recorded
            recordings.restore_report_folders(self.folder, self.out)
        steps = recordings.cpu_section_sources(self.cells, number)
        printed = [self.session.run(source, timeout=300) for _, _, source in steps]
        self.outputs[number] = "\n".join(printed)
        status = self.value(f"SECTIONS[{number}]")
        assert status["status"] == "ok", (
            f"section {number}'s own cells {[cell_id for cell_id, _, _ in steps]} failed on the recorded values in "
            f"{self.folder.name}: {status['reason']}\nFix the notebook cell named in the traceback (or {RERECORD} "
            f"if its benchmarks changed).\n{self.outputs[number][-3000:]}"
        )
        return self.outputs[number]

    def value(self, expression: str):
        return self.session.value(expression)

    def verdicts(self, number: int) -> list[str]:
        """The findings section `number` printed as "On this <gpu>: <finding>" lines, in order."""
        mark = f"On this {self.recording['provenance']['gpu']}: "
        return [line[len(mark) :] for line in self.section(number).splitlines() if line.startswith(mark)]

    def figure(self, number: int) -> dict:
        figures = [figure for figure in self.value("FIGURES") if figure["section"] == number]
        assert figures, f"section {number}'s record cell recorded no figure"
        return figures[0]

    def peaks(self) -> dict:
        label, peaks = self.value("lookup_peaks(ENVIRONMENT['gpu'])")
        assert peaks, f"{self.recording['provenance']['gpu']} has no datasheet peaks in the harness's GPU_PEAKS"
        return peaks

    def close(self) -> None:
        self.session.close()


# ---------------------------------------------------------------- names a notebook cell binds and reads (ast)
def module_level_names(source: str) -> set[str]:
    """Names a cell binds in the notebook's namespace (not a function's locals or arguments)."""
    names, pending = set(), list(ast.parse(source).body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue  # its body binds locals
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if not isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            pending.extend(ast.iter_child_nodes(node))
    return names


def free_names(source: str) -> set[str]:
    """Names a cell reads that nothing in the cell binds (so they come from an earlier cell)."""
    tree = ast.parse(source)
    bound = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)}
    bound |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)} | module_level_names(source)
    named = (ast.ExceptHandler, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # nested defs: locals
    bound |= {node.name for node in ast.walk(tree) if isinstance(node, named) and node.name}
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)} - bound
