"""Every global name a visible cell reads is a builtin, bound in it or by an earlier visible cell (named exceptions)."""

import builtins

import nbformat
import notebook_format
from IPython.core.inputtransformer2 import TransformerManager
from support import free_names, module_level_names

import plumbing.figures
import plumbing.harness
import plumbing.report_tools
import plumbing.setup_helpers
from plumbing.cells import section_of

ENTRY_POINTS = {"run_cupti_child", "profile_with_sections", "read_sections", "verdict", "check_figure", "in_base_units",
                "short_kernel_name", *(name for name in vars(plumbing.figures) if name[:5] == "plot_")}  # fmt: skip
MODULES = (plumbing.figures, plumbing.harness, plumbing.report_tools, plumbing.setup_helpers)
assert ENTRY_POINTS <= {name for module in MODULES for name in vars(module)}, "an exception names no helper"
# USE_NCU and QUIET: bound by section 1's folded cells (sections 2-10 stop reading them in visible cells: %%needs_ncu).
KNOWN = {"PEAKS", "PEAKS_LABEL", "L2_BYTES", "ENVIRONMENT", "OUT_DIR", "display", "get_ipython", "In", "Out",
         "USE_NCU", "QUIET",
         *ENTRY_POINTS, *dir(builtins)}  # fmt: skip


def hidden_names(notebook) -> dict[str, list[str]]:
    """cell id -> the names it reads that only a folded cell (so far) binds."""
    visible_bound, folded_bound, problems = set(), set(), {}
    for cell in (cell for cell in notebook.cells if cell.cell_type == "code"):
        source = TransformerManager().transform_cell(cell.source)
        if notebook_format.is_folded(cell):
            folded_bound |= module_level_names(source)
            continue
        hidden = sorted((free_names(source) - visible_bound - KNOWN) & folded_bound)
        if hidden and section_of(cell.get("id")) != 1:
            problems[cell.get("id")] = hidden
        visible_bound |= module_level_names(source)
    return problems


def test_the_checker_finds_a_name_only_a_folded_cell_binds():
    sources = [
        "## 2. A section",
        "# @title Plumbing\ndef helper():\n    return 1\nimport pandas as pd",
        "import math\nvalue = math.pi",
        "def use():\n    return helper() + value\nframe = pd.DataFrame()\nL2_BYTES",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(sources[0], id="s2-h")])
    notebook.cells += [nbformat.v4.new_code_cell(source, id=f"s2-{n}") for n, source in enumerate(sources[1:])]
    assert hidden_names(notebook) == {"s2-2": ["helper", "pd"]}


def test_every_visible_cell_uses_only_names_from_earlier_visible_cells(notebook):
    problems = hidden_names(notebook)
    assert not problems, f"import or define these in an earlier visible cell (a copy raises NameError): {problems}"
