"""A learner's copy of the visible cells runs: no name or magic only a folded cell defines, no backend `if`."""

import ast
import builtins
import re

import nbformat
import notebook_format
from support import NOTEBOOK, free_names, module_level_names, python

IPYTHON = {"display", "get_ipython", "In", "Out", "_exit_code"}  # what IPython itself gives a notebook
IPYTHON_CELL_MAGICS = {"time", "timeit", "capture", "writefile", "bash", "sh", "html", "javascript", "script"}
BACKEND_SWITCHES = {"USE_NCU"}


def visible(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code" and not notebook_format.is_folded(cell)]


def folded_only(notebook) -> dict[str, list[str]]:
    """Cell id -> the names or cell magics it uses that no visible cell before it defines (only a folded one can)."""
    bound, magics, problems = set(), set(), {}
    for cell in visible(notebook):
        source = python(cell.source)
        used = free_names(source) - bound - IPYTHON - set(dir(builtins))
        cell_magics = set(re.findall(r"^%%(\w+)", cell.source, re.M)) - magics - IPYTHON_CELL_MAGICS
        used |= {f"%%{magic}" for magic in cell_magics}
        if used:
            problems[cell.get("id")] = sorted(used)
        bound |= module_level_names(source)
        tree = ast.parse(source)
        magics |= {  # functions a visible cell registers with @register_cell_magic
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef)
            and any("register_cell_magic" in ast.unparse(d) for d in node.decorator_list)
        }
    return problems


def backend_guards(notebook) -> list[str]:
    """Ids of visible cells with a top-level `if` on the backend (USE_NCU), wherever in the cell it stands."""
    guarded = []
    for cell in visible(notebook):
        tests = [node.test for node in ast.parse(python(cell.source)).body if isinstance(node, ast.If)]
        if any(BACKEND_SWITCHES & {n.id for n in ast.walk(test) if isinstance(n, ast.Name)} for test in tests):
            guarded.append(cell.get("id"))
    return guarded


def notebook_of(*sources: str) -> nbformat.NotebookNode:
    """A notebook of these code cells; one that starts '# @title' is folded."""
    cells = [nbformat.v4.new_code_cell(source, id=f"s2-{number}") for number, source in enumerate(sources)]
    for cell in cells:
        if cell.source.startswith("# @title"):
            cell.metadata["cellView"] = "form"
    return nbformat.v4.new_notebook(cells=cells)


def test_no_visible_cell_reads_a_name_or_magic_only_a_folded_cell_defines(notebook):
    assert folded_only(notebook) == {}, f"{NOTEBOOK.name}: a learner's copy would fail on these; define them in view"


def test_the_checker_finds_a_folded_only_name_and_an_undefined_magic_but_not_a_magic_defined_in_view():
    helper = "# @title helper\ndef verdict(text):\n    print(text)"
    assert folded_only(notebook_of(helper, "verdict('ok')")) == {"s2-1": ["verdict"]}
    assert folded_only(notebook_of("%%needs_ncu\nx = 1")) == {"s2-0": ["%%needs_ncu"]}
    magic = (
        "from IPython.core.magic import register_cell_magic\n\n\n@register_cell_magic\ndef needs_ncu(line, cell): ..."
    )
    assert folded_only(notebook_of(magic, "%%needs_ncu\nx = 1\nprint(x)")) == {}
    assert folded_only(notebook_of("%%time\nsum(range(3))")) == {}, "IPython's own magics are the learner's too"


def test_no_visible_cell_branches_on_the_backend(notebook):
    assert backend_guards(notebook) == [], "a visible cell under `if USE_NCU`: put %%needs_ncu on it instead"
    assert backend_guards(notebook_of("if USE_NCU:\n    frame = f()")) == ["s2-0"], "the checker must find one"
