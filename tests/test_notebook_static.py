"""The notebook's rules that hold without running it: sections, cell ids, import order, the nsight API, lint, and a
learner's copy of the visible cells runs (no name or magic only a folded cell defines, no backend `if`)."""

import ast
import builtins
import importlib
import inspect
import operator
import re
import subprocess
import sys
import typing

import nbformat
import nsight
import pytest
from notebook_format import is_folded
from support import NOTEBOOK, ROOT, free_names, module_level_names, python

from plumbing.cells import NCU_ONLY_SECTIONS, SECTION_COUNT, section_of


@pytest.fixture(scope="module")
def notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def visible(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in code_cells(nb) if not is_folded(cell)]


def cell_trees(nb: nbformat.NotebookNode) -> list[ast.Module]:
    return [ast.parse(python(cell.source)) for cell in code_cells(nb)]


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts, node = [node.attr, *parts], node.value
    return ".".join([node.id, *parts]) if isinstance(node, ast.Name) else None


def calls_to(trees: list[ast.Module], name: str) -> list[tuple[ast.Call, dict[str, ast.AST]]]:
    """Every call of `name` with its keywords (none may be a `**` spread: it would hide them from the checks)."""
    found = []
    for node in (node for tree in trees for node in ast.walk(tree)):
        if isinstance(node, ast.Call) and dotted(node.func) == name:
            assert all(keyword.arg for keyword in node.keywords), f"write out the keywords of {ast.unparse(node)}"
            found.append((node, {keyword.arg: keyword.value for keyword in node.keywords}))
    return found


def test_sections_come_in_order_and_every_cell_id_names_the_section_of_the_heading_above_it(notebook):
    nbformat.validate(notebook)
    headings, under, wrong = [], None, []
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            match = re.match(r"## (\d+)\. ", cell.source)
            under = int(match.group(1)) if match else None
            headings.append(under or cell.source.splitlines()[0])
        if section_of(cell.get("id")) != under:
            wrong.append(f"{cell.get('id')}: plumbing/cells.py says {section_of(cell.get('id'))}, heading {under}")
    numbered = [heading for heading in headings if isinstance(heading, int)]
    assert numbered == list(range(1, SECTION_COUNT + 1)), f"'## 1.' to '## {SECTION_COUNT}.' once each, in order"
    assert str(headings[-1]).startswith("## Summary"), "the notebook must end with a '## Summary' section"
    assert not wrong, "cells whose id names another section than the heading above them:\n" + "\n".join(wrong)
    guarded = {section_of(cell.id) for cell in code_cells(notebook) if cell.source.startswith("%%needs_ncu")}
    assert guarded == NCU_ONLY_SECTIONS, (
        f"sections with a %%needs_ncu cell {sorted(guarded)}, but plumbing/sections.py's NCU_ONLY_SECTIONS says "
        f"{sorted(NCU_ONLY_SECTIONS)}: the summary would call a section SKIPPED under CUPTI that ran, or the reverse"
    )
    for cell_id in ("s11-plot", "setup", "s3_define", "", None):
        with pytest.raises(KeyError, match="s<N>-<what>"):  # the message gives the rule for a cell id
            section_of(cell_id)


def test_nsight_is_imported_before_torch_and_before_any_cuda_use(notebook):
    at = {}  # (cell index, line) where nsight, torch and CUDA are first used as cells run (not in function bodies)
    for index, tree in enumerate(cell_trees(notebook)):
        pending = [tree]
        while pending:
            node = pending.pop()
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                pending.extend(ast.iter_child_nodes(node))
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [getattr(node, "module", "")]
            kinds = {(name or "").split(".")[0] for name in names} & {"nsight", "torch"}
            text = ast.unparse(node) if isinstance(node, ast.Call) else ""
            kinds |= {"cuda"} if "cuda" in text and "torch" in text or 'device="cuda"' in text else set()
            for kind in kinds:
                at[kind] = min(at.get(kind, (index, node.lineno)), (index, node.lineno))
    assert "nsight" in at and at["nsight"] < at.get("torch", (-1,)), f"import nsight must precede import torch: {at}"
    assert at["nsight"] < at.get("cuda", (1e9,)), f"CUDA is used before import nsight: {at}"


def test_every_benchmark_uses_options_nsight_accepts_and_writes_in_the_output_folder(notebook):
    parameters = inspect.signature(nsight.analyze.kernel).parameters
    calls = calls_to(cell_trees(notebook), "nsight.analyze.kernel")
    for _, keywords in calls or pytest.fail("the notebook never calls nsight.analyze.kernel"):
        assert not set(keywords) - set(parameters), f"nsight 1.1.0 has no keyword {set(keywords) - set(parameters)}"
        for name, value in keywords.items():  # nsight does not check thermal_mode: a typo there means "manual"
            allowed = typing.get_args(parameters[name].annotation)
            if typing.get_origin(parameters[name].annotation) is typing.Literal and isinstance(value, ast.Constant):
                assert value.value in allowed, f"{name}={value.value!r} is not one of {allowed}"
        prefix = keywords.get("output_prefix", ast.Constant(None))  # the Name "prefix": a child's, from its parent
        parts = prefix.values if isinstance(prefix, ast.JoinedStr) else [prefix]  # f"s8_{mode}/" too
        text = "".join(part.value if isinstance(part, ast.Constant) else "{x}" for part in parts)
        folder = text if all(isinstance(part, (ast.Constant, ast.FormattedValue)) for part in parts) else None
        relative = isinstance(folder, str) and folder.endswith("/") and not folder.startswith(("/", "~"))
        parameter = getattr(prefix, "id", None) in ("prefix", "folder")  # a helper's: its callers give the folder
        assert (relative and ".." not in folder) or parameter, (
            f"output_prefix={ast.unparse(prefix)} must be a folder inside the working folder (OUT_DIR): 'name/'"
        )
    swept = [call.args[0] for call, _ in calls_to(cell_trees(notebook), "sweep") if call.args]  # section 9's helper
    folders = [arg.value for arg in swept if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    assert folders and all(f.endswith("/") and not f.startswith(("/", "~", "..")) for f in folders), (
        f"section 9's sweep(folder) must be given a folder inside the working folder: {folders}"
    )


def test_every_nsight_name_used_exists_in_the_installed_library(notebook):
    names = set()
    for node in (node for tree in cell_trees(notebook) for node in ast.walk(tree)):
        if isinstance(node, ast.Attribute) and (dotted(node) or "").startswith("nsight."):
            names.add(dotted(node))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nsight"):
            importlib.import_module(node.module)  # a module nsight lacks fails here
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    assert {"nsight.annotate", "nsight.experimental.collect"} <= names
    for name in sorted(names):  # an AttributeError names what this nsight lacks
        operator.attrgetter(name.partition(".")[2])(nsight)


def test_requirements_never_ask_for_torch():
    for path in ROOT.glob("requirements*.txt"):
        assert not re.search(r"^\s*torch\b", path.read_text(), re.M), f"{path.name} would pull a (CUDA) torch"


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_is_clean_on_the_notebook_scripts_and_tests(command):
    done = subprocess.run([sys.executable, "-m", "ruff", *command, "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"run `ruff {command[0]}` (with --fix for check):\n{done.stdout}{done.stderr}"


def test_visible_code_cells_fit_on_a_screen_and_learner_cells_do_no_harness_bookkeeping(notebook):
    long_cells = [
        c.get("id") for c in visible(notebook) if sum(bool(line.strip()) for line in c.source.splitlines()) > 40
    ]
    assert not long_cells, f"visible code cells over 40 lines (split them, or fold plumbing): {long_cells}"
    bookkeeping = {"record_figure", "build_summary", "report_summary", "section_entry"}
    calls = {
        cell.get("id"): names
        for cell in visible(notebook)
        if section_of(cell.get("id")) and (names := bookkeeping & free_names(python(cell.source)))
    }
    assert not calls, f"visible section code calls harness bookkeeping; move it to a folded cell: {calls}"


@pytest.mark.parametrize("number", range(1, SECTION_COUNT + 1))
def test_each_section_ends_with_a_visible_cell_that_prints_its_verdict(notebook, number):
    last = [cell for cell in code_cells(notebook) if section_of(cell.get("id")) == number][-1]
    assert not is_folded(last) and 'print(f"On this {gpu}: ' in last.source, (
        f'section {number}\'s last code cell ({last.get("id")}) must be visible and print(f"On this {{gpu}}: ...")'
    )


def test_no_cell_binds_the_names_ipython_keeps_for_the_last_outputs(notebook):
    offenders = {
        cell.get("id"): names
        for cell in code_cells(notebook)
        if (names := module_level_names(python(cell.source)) & {"_", "__", "___"})
    }
    assert not offenders, f"these cells bind IPython's output names (it stops updating them): {offenders}"


IPYTHON = {"display", "get_ipython", "In", "Out", "_exit_code"}  # what IPython itself gives a notebook
IPYTHON_CELL_MAGICS = {"time", "timeit", "capture", "writefile", "bash", "sh", "html", "javascript", "script"}


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
        magics |= set(re.findall(r"^@register_cell_magic\s+def (\w+)", source, re.M))  # a magic defined in view
    return problems


def backend_guards(notebook) -> list[str]:
    """Ids of visible cells with a top-level `if` on the backend (USE_NCU), wherever in the cell it stands."""
    guarded = []
    for cell in visible(notebook):
        tests = [node.test for node in ast.parse(python(cell.source)).body if isinstance(node, ast.If)]
        if any({"USE_NCU"} & {n.id for n in ast.walk(test) if isinstance(n, ast.Name)} for test in tests):
            guarded.append(cell.get("id"))
    return guarded


def notebook_of(*sources: str) -> nbformat.NotebookNode:
    """A notebook of these code cells; one that starts '# @title' is folded (is_folded reads the title)."""
    cells = [nbformat.v4.new_code_cell(source, id=f"s2-{number}") for number, source in enumerate(sources)]
    return nbformat.v4.new_notebook(cells=cells)


def test_no_visible_cell_reads_a_name_or_magic_only_a_folded_cell_defines(notebook):
    assert folded_only(notebook) == {}, f"{NOTEBOOK.name}: a learner's copy would fail on these; define them in view"


def test_the_checker_finds_a_folded_only_name_and_an_undefined_magic_but_not_a_magic_defined_in_view():
    helper = "# @title helper\ndef verdict(text):\n    print(text)"
    assert folded_only(notebook_of(helper, "verdict('ok')")) == {"s2-1": ["verdict"]}
    assert folded_only(notebook_of("%%needs_ncu\nx = 1")) == {"s2-0": ["%%needs_ncu"]}
    magic = "from IPython.core.magic import register_cell_magic\n@register_cell_magic\ndef needs_ncu(line, cell): ..."
    assert folded_only(notebook_of(magic, "%%needs_ncu\nx = 1\nprint(x)")) == {}
    assert folded_only(notebook_of("%%time\nsum(range(3))")) == {}, "IPython's own magics are the learner's too"


def test_no_visible_cell_branches_on_the_backend(notebook):
    assert backend_guards(notebook) == [], "a visible cell under `if USE_NCU`: put %%needs_ncu on it instead"
    assert backend_guards(notebook_of("if USE_NCU:\n    frame = f()")) == ["s2-0"], "the checker must find one"
