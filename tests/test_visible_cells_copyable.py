"""A learner copies the visible cells into a notebook of their own: every global name a visible cell reads (at top
level or in its functions, by symtable) must be a builtin, bound in the cell, or bound by an earlier visible cell.
Named exceptions: section 1's own cells (a learner's own setup replaces them) and the values it reports, and the
plumbing entry points a visible cell calls: the CUPTI child, the plots, section 10's report tools, the harness's
reporting calls (in a learner's notebook, a print)."""

from __future__ import annotations

import builtins
import symtable

import notebook_format
from notebook_ast import cell_python
from support import cells_with_section

import plumbing.figures
import plumbing.harness
import plumbing.report_tools
import plumbing.setup_helpers

SECTION_ONE_VALUES = {"PEAKS", "PEAKS_LABEL", "L2_BYTES", "ENVIRONMENT", "OUT_DIR"}
NOTEBOOK_BUILTINS = {"display", "get_ipython", "In", "Out"}
FIGURE_HELPERS = {name for name in vars(plumbing.figures) if name.startswith("plot_")}
REPORT_HELPERS = {"profile_with_sections", "read_sections"}
HARNESS_CALLS = {"verdict", "check_figure", "in_base_units", "short_kernel_name"}
PLUMBING_ENTRY_POINTS = {"run_cupti_child", *FIGURE_HELPERS, *REPORT_HELPERS, *HARNESS_CALLS}
MODULES = (plumbing.figures, plumbing.harness, plumbing.report_tools, plumbing.setup_helpers)
assert PLUMBING_ENTRY_POINTS <= {name for module in MODULES for name in vars(module)}, "an exception names no helper"
SETUP_SECTION = 1


def _all_tables(table: symtable.SymbolTable):
    yield table
    yield from (nested for child in table.get_children() for nested in _all_tables(child))


def names_read_and_bound(source: str) -> tuple[set[str], set[str]]:
    """(global names the cell reads anywhere, names it binds at top level)."""
    top = symtable.symtable(source, "<cell>", "exec")
    bound = {symbol.get_name() for symbol in top.get_symbols() if symbol.is_assigned() or symbol.is_imported()}
    bound |= {child.get_name() for child in top.get_children() if child.get_type() in ("function", "class")}
    read = {symbol.get_name() for table in _all_tables(top) for symbol in table.get_symbols()
            if symbol.is_referenced() and (table is top or symbol.is_global())}  # fmt: skip
    return read, bound


def hidden_names(notebook) -> dict[str, list[str]]:
    """cell id -> the names it reads that only a folded cell (so far) binds."""
    visible_bound, folded_bound, problems = set(), set(), {}
    for section, cell in cells_with_section(notebook):
        if cell.cell_type != "code":
            continue
        read, bound = names_read_and_bound(cell_python(cell))
        if notebook_format.is_folded(cell):
            folded_bound |= bound
            continue
        if section == SETUP_SECTION:
            visible_bound |= bound
            continue
        known = (
            visible_bound | bound | SECTION_ONE_VALUES | NOTEBOOK_BUILTINS | PLUMBING_ENTRY_POINTS | set(dir(builtins))
        )
        if hidden := sorted(name for name in read - known if name in folded_bound):
            problems[cell.get("id")] = hidden
        visible_bound |= bound
    return problems


def test_the_checker_finds_a_name_only_a_folded_cell_binds():
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("## 2. A section"),
        nbformat.v4.new_code_cell("# @title Plumbing\ndef helper():\n    return 1\nimport pandas as pd"),
        nbformat.v4.new_code_cell("import math\nvalue = math.pi"),
        nbformat.v4.new_code_cell("def use():\n    return helper() + value\nframe = pd.DataFrame()\nL2_BYTES"),
    ]
    for cell, cell_id in zip(notebook.cells, ["s2-heading", "s2-plumbing", "s2-values", "s2-use"], strict=True):
        cell["id"] = cell_id
    assert hidden_names(notebook) == {"s2-use": ["helper", "pd"]}


def test_every_visible_cell_uses_only_names_from_earlier_visible_cells(notebook):
    problems = hidden_names(notebook)
    assert not problems, (
        "visible cells read names that only a folded cell defines, so a learner who copies them gets a NameError: "
        + "; ".join(f"{cell}: {', '.join(names)}" for cell, names in problems.items())
        + ". Import or define each one in an earlier visible cell (or in the cell itself)."
    )
