"""What several test modules share: paths, the notebook's cells by id, and the notebook on a recording in a kernel."""

import ast
import json
import os
import re
import subprocess
import symtable
import sys
from pathlib import Path

import recordings
from kernel_session import KernelSession
from pytest import approx

from plumbing.cells import HARNESS, SECTION_PLAN
from plumbing.harness import lookup_peaks

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
RERECORD = "re-record that section on the GPU runner (--sections N), run tools/render_recorded.py, commit the folder"


# The Unit column's scales, to seconds and bytes (percentages stay percentages): the tests' own table, not the
# harness's, so that a wrong factor there is caught by a test rather than shared with it.
TO_BASE = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
           "second": 1.0, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "hz": 1.0, "Hz": 1.0, "MHz": 1e6,
           "GHz": 1e9, "%": 1.0}  # fmt: skip


def frame_rows(frame, regions: int, metrics: int) -> dict:
    """{(annotation, metric): AvgValue in seconds, bytes, Hz or %} of a recorded frame, one row each."""
    keys = list(zip(frame.Annotation, frame.Metric, strict=True))
    assert len(keys) == len(set(keys)) == regions * metrics, f"not {regions} regions x {metrics} metrics: {keys}"
    return {key: value * TO_BASE[unit] for key, value, unit in zip(keys, frame.AvgValue, frame.Unit, strict=True)}


def ncu_namespace(*cell_ids: str, **names) -> dict:
    """The plan's shared cells then `cell_ids`, run in this process under Nsight Compute."""
    import nsight

    cells = recordings.load_cells()
    namespace = {"__name__": "__main__", "nsight": nsight, "QUIET": nsight.VerbosityLevel.SILENT, "USE_NCU": True}
    for cell_id in (*recordings.prelude_cell_ids(cells), *cell_ids):
        namespace.update(names)
        recordings.run_cell(namespace, recordings.cell_source(cells, cell_id), cell_id, echo=False)
    return namespace


def run_allowing_errors(notebook: Path, copy: Path, timeout_s: int) -> tuple[int, str]:
    """nbmake on a copy of notebook with metadata.execution.allow_errors (every cell runs; outputs in the copy)."""
    content = json.loads(notebook.read_text())
    content["metadata"]["execution"] = {"allow_errors": True}
    copy.write_text(json.dumps(content, indent=1) + "\n")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(copy.parent), "-o",
               "addopts=", "--nbmake", f"--nbmake-timeout={timeout_s}", "--overwrite", str(copy)]  # fmt: skip
    env = dict(os.environ, NSPY_TUTORIAL_OUT=str(copy.parent))
    done = subprocess.run(command, cwd=copy.parent, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


# Section `number`'s analysis cells again, in a copy of the namespace where `change` ran first; SECTIONS and FIGURES
# are put back after.
ALTERED = """import copy as _copy
_saved, _scratch = (_copy.deepcopy(SECTIONS), _copy.deepcopy(FIGURES)), dict(globals())
try:
    for _i, _source in enumerate({defines!r}):  # the section's own settings again: a later one may reuse a name
        _file = f"<define cell {{_i}} of section {number}>"  # in linecache, so inspect.getsource finds its functions
        __import__("linecache").cache[_file] = (len(_source), None, _source.splitlines(True), _file)
        exec(compile(_source, _file, "exec"), _scratch)
    exec({change!r}, _scratch)
    SECTIONS.pop({number}, None)
    for _source in {sources!r}:
        exec(_source, _scratch)
    _altered = {{"findings": SECTIONS[{number}]["findings"], "read": eval({read!r}, _scratch)}}
finally:
    SECTIONS.clear(), SECTIONS.update(_saved[0]), FIGURES.__setitem__(slice(None), _saved[1])
"""


def parse(template: str, findings: list[str]) -> list:
    """The holes ({}) of the one finding written as `template`, numbers as floats ("1,234" and "1.5x" too)."""
    pattern = re.compile(re.escape(template).replace(r"\{\}", "(.+?)") + "$")
    found = [match.groups() for match in map(pattern.match, findings) if match]
    assert len(found) == 1, f"one finding should read {template!r}; the section printed {findings}"

    numeric = re.compile(r"[+-]?[\d,]*\.?\d+[x%]?")
    return [float(t.replace(",", "").rstrip("x%")) if numeric.fullmatch(t) else t for t in found[0]]


class RecordedNotebook:
    """A kernel with a recording's section 1 and shared cells; .section(N) runs its sections up to N, once."""

    def __init__(self, folder: Path, tmp_path: Path):
        self.folder, self.out, self.cells = folder, tmp_path / "out", recordings.load_cells()
        self.recording = recordings.load_recording(folder)
        self.sections = recordings.recorded_sections(self.recording)
        self.pending, self.outputs, self.failure, self.pngs = list(self.sections), {}, None, []
        env = {"NSPY_TUTORIAL_OUT": str(self.out), "MPLBACKEND": "Agg", "NSPY_NCU_INIT_AT_IMPORT": "0"}
        self.session = KernelSession(env=env, cwd=tmp_path)
        self.session.run(recordings.cell_source(self.cells, HARNESS))  # a failed set-up's kernel: see its finaliser
        self.session.run(recordings.cpu_section_one_source(folder))
        for cell_id in recordings.prelude_cell_ids(self.cells)[1:]:
            self.session.run(recordings.cell_source(self.cells, cell_id))
        recordings.restore_report_folders(folder, self.out)  # the files sections 7, 8 and 10 wrote and read

    def section(self, number: int) -> str:
        """What section `number` printed."""
        assert number in self.sections, f"{self.folder.name} holds no section {number}: {RERECORD}"
        while number not in self.outputs:
            assert self.failure is None, self.failure
            now, printed, raised = self.pending.pop(0), [], ""
            for cell_id, _, source in recordings.cpu_section_sources(self.cells, now):
                done = self.session.execute(source, timeout=300)
                printed, self.pngs = [*printed, done.stdout], [*self.pngs, *done.pngs]
                if done.status == "error":
                    raised = f"{cell_id} raised {done.content['ename']}: {done.content['evalue']}"
                    break
            self.outputs[now] = "\n".join(printed)
            status = self.value(f"SECTIONS.get({now}, {{'status': 'NOT RUN', 'reason': 'no verdict'}})")
            if raised or status["status"] != "ok":
                self.failure = f"section {now} on {self.folder.name}: {raised or status}\n{printed[-1][-2000:]}"
            assert self.failure is None, f"{self.failure}\nFix that cell (or {RERECORD} if its benchmarks changed)"
        return self.outputs[number]

    def value(self, expression: str):  # a JSON value, from the kernel
        return self.session.value(expression)

    def bound(self, number: int) -> dict:
        """What section `number`'s run cells bound on the GPU machine (the raw frames its analysis reads)."""
        ids = [*SECTION_PLAN[number].get("gpu_define", ()), *SECTION_PLAN[number]["run"]]
        return {name: value for cell_id in ids for name, value in self.recording["cells"][cell_id]["variables"].items()}

    def findings(self, number: int) -> list[str]:
        """What section `number` printed as "On this <gpu>: <finding>" lines, in order."""
        mark = f"On this {self.recording['provenance']['gpu']}: "
        return [line[len(mark) :] for line in self.section(number).splitlines() if line.startswith(mark)]

    def shown(self, number: int, template: str) -> list:
        return parse(template, self.findings(number))

    def check_figure(self, number: int, name: str, value: float, unit: str, peak_kind: str, rel=1e-3) -> None:
        """Section `number`'s figure `name` is `value` (worked out from the raw rows) in `unit` against `peak_kind`."""
        self.section(number)
        figures = {figure["name"]: figure for figure in self.value("FIGURES") if figure["section"] == number}
        found = [figures.get(name, {}).get(key) for key in ("value", "unit", "peak_kind")]
        assert found == [approx(value, rel=rel), unit, peak_kind], (
            f"section {number}'s figure {name!r} (of {sorted(figures)}): check the row, count and unit of its call"
        )

    def peaks(self) -> dict:
        assert (peaks := lookup_peaks(self.recording["provenance"]["gpu"])[1]), "no datasheet peaks in GPU_PEAKS"
        return peaks

    def altered(self, number: int, change: str, read: str = "None") -> dict:
        """What section `number`'s analysis cells conclude after `change`, in a copy of the namespace."""
        self.section(number)
        steps = recordings.cpu_section_sources(self.cells, number)
        sources = [recordings.without_cell_magic(source) for _, role, source in steps if role == "analysis"]
        defines = [recordings.without_cell_magic(source) for _, role, source in steps if role == "define"]
        self.session.run(ALTERED.format(number=number, change=change, defines=defines, sources=sources, read=read))
        return self.value("_altered")


def module_level_names(source: str) -> set[str]:
    """Names a cell binds in the notebook's namespace (not a function's locals, a comprehension's loop variables,
    nor `except ... as` names). On Python 3.13 symtable lists an inlined comprehension's variable as bound at top
    level (PEP 709), though running the cell binds nothing: such a name counts only if something else binds it."""
    tree = ast.parse(source)
    caught = {node.name for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler)}
    looping = {
        id(name) for loop in ast.walk(tree) if isinstance(loop, ast.comprehension) for name in ast.walk(loop.target)
    }
    stores = [node for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)]
    only_looping = {n.id for n in stores if id(n) in looping} - {n.id for n in stores if id(n) not in looping}
    table = symtable.symtable(source, "<cell>", "exec")
    return {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()} - caught - only_looping


def free_names(source: str) -> set[str]:
    """Names a cell reads (at top level or as globals in its functions) that it does not bind itself."""
    tables, read = [top := symtable.symtable(source, "<cell>", "exec")], set()
    for table in tables:
        tables += table.get_children()
        read |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and (table is top or s.is_global())}
    return read - {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
