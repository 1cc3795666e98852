"""What several test modules share: paths, the suite's notebook reader, cells run on a namespace, nbmake on a copy."""

import ast
import contextlib
import io
import json
import linecache
import os
import re
import subprocess
import symtable
import sys
from pathlib import Path

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


def load_cells(path: Path = NOTEBOOK) -> list[dict]:
    """[{"id", "type", "source", "outputs"}] of a notebook's cells, in order."""
    cells = json.loads(Path(path).read_text())["cells"]
    return [
        dict(id=cell.get("id"), type=cell["cell_type"], source="".join(cell["source"]), outputs=cell.get("outputs", []))
        for cell in cells
    ]


def cell_source(cells: list[dict], cell_id: str) -> str:
    found = [cell for cell in cells if cell["id"] == cell_id and cell["type"] == "code"]
    assert found, f"the notebook has no code cell {cell_id!r}: did its id change?"
    return found[0]["source"]


def defined(cell_id, *names):
    """The cell's functions `names`, defined from a file name linecache knows, as IPython does, so that inspect finds
    their source; the rest of the cell (decorators that need a GPU's nsight) is not run."""
    source = cell_source(load_cells(), cell_id)
    tree = ast.parse(source)
    tree.body = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    filename = f"<cell {cell_id}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {}
    exec(compile(tree, filename, "exec"), namespace)
    return {name: namespace[name] for name in names}


def without_magic(source: str) -> str:
    """A cell's Python with its %%needs_ncu line dropped (what the magic runs under Nsight Compute)."""
    first, _, rest = source.partition("\n")
    return rest if first.strip() == "%%needs_ncu" else source


def python(source: str) -> str:
    """A cell's Python as IPython runs it: %%needs_ncu's body as typed, other magics and shell escapes as calls."""
    from IPython.core.inputtransformer2 import TransformerManager  # here: the GPU run's pytest may lack IPython

    return TransformerManager().transform_cell(without_magic(source))


def run_cells(cell_ids, namespace: dict) -> str:
    """Today's notebook cells by id, run in `namespace` as the magic runs them; what they printed."""
    cells = load_cells()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for cell_id in cell_ids:
            source = without_magic(cell_source(cells, cell_id))
            exec(compile(source, f"<cell {cell_id}>", "exec"), namespace)
    return printed.getvalue()


def verdicts(printed: str) -> list[str]:
    """The findings of "On this <GPU>: <finding>" lines, in order."""
    return [line.split(": ", 1)[1] for line in printed.splitlines() if line.startswith("On this ")]


def run_allowing_errors(notebook: Path, copy: Path, timeout_s: int) -> tuple[int, str]:
    """nbmake on a copy of notebook with metadata.execution.allow_errors (every cell runs; outputs in the copy)."""
    content = json.loads(notebook.read_text())
    content["metadata"]["execution"] = {"allow_errors": True}
    copy.write_text(json.dumps(content, indent=1) + "\n")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "--nbmake", "--overwrite"]
    command += ["--rootdir", str(copy.parent), f"--nbmake-timeout={timeout_s}", str(copy)]
    env = dict(os.environ, NSPY_TUTORIAL_OUT=str(copy.parent))
    done = subprocess.run(command, cwd=copy.parent, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def parse(template: str, findings: list[str]) -> list:
    """The holes ({}) of the one finding written as `template`, numbers as floats ("1,234" and "1.5x" too)."""
    pattern = re.compile(re.escape(template).replace(r"\{\}", "(.+?)") + "$")
    found = [match.groups() for match in map(pattern.match, findings) if match]
    assert len(found) == 1, f"one finding should read {template!r}; the section printed {findings}"

    numeric = re.compile(r"[+-]?[\d,]*\.?\d+[x%]?")
    return [float(t.replace(",", "").rstrip("x%")) if numeric.fullmatch(t) else t for t in found[0]]


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
