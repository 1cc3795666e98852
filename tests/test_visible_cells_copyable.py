"""A learner copies the visible cells into a notebook of their own: every name they use must come from them.

Each visible (unfolded) code cell is read with Python's symtable: every global name it reads, at top level or
inside its functions, must be a builtin, bound earlier in the same cell, or bound by an earlier visible cell (an
import, a def, an assignment). The only exceptions are the values section 1 reports in its table (OWNERSHIP:
PEAKS, L2_BYTES, ENVIRONMENT, ...). A name that only a folded `# @title` cell binds is plumbing the learner does
not see, so a copied cell would raise NameError.

Deliberate exceptions, named here so that nothing else slips through: section 1's own cells (they install and
choose the profiler through the setup helpers, such as choose_ncu, install_pins and choose_backend; a learner's
notebook replaces them with its own setup), section 9's CUPTI child process (`run_cupti_child`, plumbing that
starts a second Python process), the plot functions of plumbing/figures.py (a picture repeats a table the learner's
own cell printed), section 10's going-further helpers (plumbing/report_tools.py), and the harness's reporting calls
a verdict cell ends with (`verdict`, `check_figure`: in a learner's own notebook, a print) with its unit conversion
(`in_base_units`) and kernel-name shortener (`short_kernel_name`).
"""

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

# What section 1's folded cells bind for later sections (USE_NCU, QUIET, nsight and torch its visible cells bind):
# a learner's own notebook gets these from its own setup.
SECTION_ONE_VALUES = {"PEAKS", "PEAKS_LABEL", "L2_BYTES", "ENVIRONMENT", "OUT_DIR"}
# IPython gives every notebook these without an import.
NOTEBOOK_BUILTINS = {"display", "get_ipython", "In", "Out"}
# Section 9: the CUPTI side runs in a second Python process. The plots: one folded module draws every picture.
FIGURE_HELPERS = {name for name in vars(plumbing.figures) if name.startswith("plot_")}
REPORT_HELPERS = {"profile_with_sections", "read_sections"}
HARNESS_CALLS = {"verdict", "check_figure", "in_base_units", "short_kernel_name"}
PLUMBING_ENTRY_POINTS = {"run_cupti_child", *FIGURE_HELPERS, *REPORT_HELPERS, *HARNESS_CALLS}
MODULES = (plumbing.figures, plumbing.harness, plumbing.report_tools, plumbing.setup_helpers)
assert PLUMBING_ENTRY_POINTS <= {name for module in MODULES for name in vars(module)}, "an exception names no helper"
SETUP_SECTION = 1


def _all_tables(table: symtable.SymbolTable):
    yield table
    for child in table.get_children():
        yield from _all_tables(child)


def names_read_and_bound(source: str) -> tuple[set[str], set[str]]:
    """(global names the cell reads anywhere, names it binds at top level)."""
    top = symtable.symtable(source, "<cell>", "exec")
    bound = {symbol.get_name() for symbol in top.get_symbols() if symbol.is_assigned() or symbol.is_imported()}
    bound |= {child.get_name() for child in top.get_children() if child.get_type() in ("function", "class")}
    read = set()
    for table in _all_tables(top):
        for symbol in table.get_symbols():
            if not symbol.is_referenced():
                continue
            if table is top or symbol.is_global():
                read.add(symbol.get_name())
    return read, bound


def hidden_names(notebook) -> dict[str, list[str]]:
    """cell id -> the names it reads that only a folded cell (so far) binds."""
    visible_bound: set[str] = set()
    folded_bound: set[str] = set()
    problems = {}
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
        known = visible_bound | bound | SECTION_ONE_VALUES | NOTEBOOK_BUILTINS | PLUMBING_ENTRY_POINTS
        known |= set(dir(builtins))
        hidden = sorted(name for name in read - known if name in folded_bound)
        if hidden:
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
    # Made-up ids that the cell table (plumbing/cells.py) reads as section 2's.
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
