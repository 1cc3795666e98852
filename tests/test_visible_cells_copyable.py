"""A visible cell can be copied into a learner's own notebook: the names it reads are builtins, bound in it or by an
earlier visible cell, or among the few that only folded cells define; and no visible cell sits under a backend `if`."""

import ast
import builtins

import nbformat
import notebook_format
from IPython.core.inputtransformer2 import TransformerManager
from recordings import without_cell_magic
from support import free_names, module_level_names

from plumbing.cells import section_of

FOLDED_ONLY_LIMIT = 4  # the rule: at most four names only folded cells define, in all visible cells
# The only folded-only names a lesson (sections 2 to 10) may read: the verdict and figure helpers, and section 9's
# CUPTI_PRELOAD (the child's first lines: this notebook's own CUPTI folder, not part of what a learner copies)
LESSON_HELPERS = {"verdict", "check_figure", "CUPTI_PRELOAD"}
IPYTHON = {"display", "get_ipython", "In", "Out"}  # what IPython itself gives a notebook
BACKEND_SWITCHES = {"USE_NCU"}


def python(source: str) -> str:
    return TransformerManager().transform_cell(without_cell_magic(source))


def hidden_names(notebook) -> dict[str, list[str]]:
    """cell id -> the names it reads that only a folded cell (so far) binds."""
    visible_bound, folded_bound, problems = set(), set(), {}
    for cell in (cell for cell in notebook.cells if cell.cell_type == "code"):
        source = python(cell.source)
        if notebook_format.is_folded(cell):
            folded_bound |= module_level_names(source)
            continue
        hidden = sorted((free_names(source) - visible_bound - IPYTHON - set(dir(builtins))) & folded_bound)
        if hidden:
            problems[cell.get("id")] = hidden
        visible_bound |= module_level_names(source)
    return problems


def backend_guards(notebook) -> list[str]:
    """Ids of visible cells with a top-level `if` on the backend (USE_NCU), wherever in the cell it stands."""
    guarded = []
    for cell in (c for c in notebook.cells if c.cell_type == "code" and not notebook_format.is_folded(c)):
        tests = [node.test for node in ast.parse(python(cell.source)).body if isinstance(node, ast.If)]
        if any(BACKEND_SWITCHES & {n.id for n in ast.walk(test) if isinstance(n, ast.Name)} for test in tests):
            guarded.append(cell.get("id"))
    return guarded


def notebook_of(*sources: str) -> nbformat.NotebookNode:
    """Section 2's cells from sources; one that starts '# @title' is folded, one that starts '## ' is markdown."""
    cells = []
    for number, source in enumerate(sources):
        make = nbformat.v4.new_markdown_cell if source.startswith("## ") else nbformat.v4.new_code_cell
        cells.append(make(source, id=f"s2-{number}"))
        if source.startswith("# @title"):
            cells[-1].metadata["cellView"] = "form"
    return nbformat.v4.new_notebook(cells=cells)


def test_the_checker_finds_a_name_only_a_folded_cell_binds_also_under_the_cell_magic():
    notebook = notebook_of(
        "## 2. A section",
        "# @title Plumbing\ndef helper():\n    return 1\nimport pandas as pd\nUSE_NCU = True",
        "import math\nvalue = math.pi",
        "%%needs_ncu\ndef use():\n    return helper() + value\nframe = pd.DataFrame()\ndisplay(frame)",
    )
    assert hidden_names(notebook) == {"s2-3": ["helper", "pd"]}


def test_the_guard_checker_finds_a_top_level_backend_if_but_not_one_inside_a_function():
    notebook = notebook_of(
        "# @title Plumbing\nUSE_NCU = True",
        "x = 1\nif not USE_NCU:\n    x = 2",
        "def f():\n    if USE_NCU:\n        return 1",
        "%%needs_ncu\nif USE_NCU and x:\n    pass",
    )
    assert backend_guards(notebook) == ["s2-1", "s2-3"]


def test_lesson_cells_read_no_folded_only_name_but_the_verdict_and_figure_helpers(notebook):
    lessons = {cell: names for cell, names in hidden_names(notebook).items() if section_of(cell) not in (None, 1)}
    extra = {cell: sorted(set(names) - LESSON_HELPERS) for cell, names in lessons.items()}
    extra = {cell: names for cell, names in extra.items() if names}
    assert not extra, f"define or import these visibly in the section that uses them (a copy raises NameError): {extra}"


def test_all_visible_cells_together_read_at_most_four_names_only_folded_cells_define(notebook):
    used = sorted({name for names in hidden_names(notebook).values() for name in names})
    assert len(used) <= FOLDED_ONLY_LIMIT, (
        f"visible cells read {len(used)} names that only folded cells define, at most {FOLDED_ONLY_LIMIT} allowed: "
        f"{used}; make the others visible (or ask for them in a visible cell)"
    )


def test_no_visible_cell_branches_on_the_backend(notebook):
    guarded = backend_guards(notebook)
    assert not guarded, (
        f"visible cells under `if USE_NCU`: {guarded}; start a cell that needs Nsight Compute with the line "
        "%%needs_ncu instead (it says why it skipped under CUPTI)"
    )


def test_the_verdict_cells_together_stay_within_forty_visible_lines(notebook):
    lines = {
        cell.get("id"): sum(1 for line in cell.source.splitlines() if line.strip())
        for cell in notebook.cells
        if cell.cell_type == "code" and not notebook_format.is_folded(cell) and "verdict(" in cell.source
    }
    assert sum(lines.values()) <= 40, f"the verdict cells hold {sum(lines.values())} lines, at most 40: {lines}"
