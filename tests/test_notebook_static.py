"""What can be checked without running anything: structure, import order, the nsight API, pins, format."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import typing

import nbformat
import notebook_format
import nsight
import pytest
from notebook_ast import all_trees, calls_to, cell_python, code_cells, dotted, parsed_cells
from support import ROOT, cells_with_section, section_code_cells

from plumbing.cells import SECTION_COUNT, section_of

SECTION_TITLES = re.compile(r"^## (\d+)\. ", re.M)


def test_notebook_validates_against_the_nbformat_schema(notebook):
    nbformat.validate(notebook)


def test_notebook_opens_with_title_colab_badge_and_overview(notebook):
    first, second = notebook.cells[0], notebook.cells[1]
    assert first.cell_type == "markdown" and first.source.startswith("# "), "cell 1 must be the '# ' title"
    assert "colab.research.google.com/github/" in first.source and "colab-badge.svg" in first.source, (
        "the title cell needs an Open in Colab badge linking to the notebook on GitHub"
    )
    assert second.source.startswith("## Overview"), "the cell after the title must be the '## Overview'"


def test_each_numbered_heading_opens_the_section_the_cell_table_gives_its_cell_then_a_summary(notebook):
    headings = [
        (int(match.group(1)), cell.get("id"))
        for cell in notebook.cells
        if cell.cell_type == "markdown"
        for match in SECTION_TITLES.finditer(cell.source)
    ]
    assert [number for number, _ in headings] == list(range(1, SECTION_COUNT + 1)), (
        f"expected '## 1.' to '## {SECTION_COUNT}.' once each, in order (plumbing/cells.py: SECTION_COUNT); {headings}"
    )
    wrong = [(number, cell_id) for number, cell_id in headings if section_of(cell_id) != number]
    assert not wrong, f"headings whose cell id plumbing/cells.py puts in another section: {wrong}"
    last_heading = [c.source for c in notebook.cells if c.cell_type == "markdown" and c.source.startswith("## ")][-1]
    assert last_heading.startswith("## Summary"), "the notebook must end with a '## Summary' section"


def test_every_code_cell_parses_as_python(notebook):
    for cell in code_cells(notebook):
        try:
            ast.parse(cell_python(cell))
        except SyntaxError as error:
            pytest.fail(f"cell {cell.get('id')} does not parse: {error}")


def _run_when_the_cell_runs(tree):
    """The nodes a cell executes as it runs: not the bodies of the functions it only defines."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def _first_position(notebook, predicate):
    for index, (_, tree) in enumerate(parsed_cells(notebook)):
        for node in sorted(_run_when_the_cell_runs(tree), key=lambda n: getattr(n, "lineno", 0)):
            if predicate(node):
                return (index, node.lineno)
    return None


def _imports(module):
    def predicate(node):
        if isinstance(node, ast.Import):
            return any(alias.name.split(".")[0] == module for alias in node.names)
        return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == module

    return predicate


def _touches_cuda(node):
    text = ast.unparse(node) if isinstance(node, ast.Call) else ""
    return isinstance(node, ast.Call) and ("cuda" in text and "torch" in text or 'device="cuda"' in text)


def test_nsight_is_imported_before_torch_and_before_any_cuda_use(notebook):
    nsight_at = _first_position(notebook, _imports("nsight"))
    torch_at = _first_position(notebook, _imports("torch"))
    cuda_at = _first_position(notebook, _touches_cuda)
    assert nsight_at is not None, "the notebook never imports nsight"
    assert torch_at is not None and nsight_at < torch_at, (
        f"import nsight {nsight_at} must precede import torch {torch_at}"
    )
    assert cuda_at is None or nsight_at < cuda_at, f"CUDA is used at {cuda_at}, before import nsight at {nsight_at}"


@pytest.mark.parametrize("decorator", ["nsight.analyze.kernel"])
def test_decorator_keywords_are_accepted_by_installed_nsight(notebook, decorator):
    signature = inspect.signature(eval(decorator, {"nsight": nsight}))  # noqa: S307 - a dotted name from our list
    calls = calls_to(all_trees(notebook), decorator)
    assert calls, f"the notebook never calls {decorator}"
    for call, keywords in calls:
        unknown = set(keywords) - set(signature.parameters)
        assert not unknown, f"{decorator} in 1.1.0 has no keyword {sorted(unknown)}: {ast.unparse(call)[:120]}"


def test_literal_options_use_values_nsight_accepts(notebook):
    # nsight checks cache_control, clock_control and replay_mode, but not thermal_mode: a typo there
    # silently means "manual". So every constant given to a Literal parameter is checked here.
    signature = inspect.signature(nsight.analyze.kernel)
    for _, keywords in calls_to(all_trees(notebook), "nsight.analyze.kernel"):
        for name, value in keywords.items():
            annotation = signature.parameters[name].annotation
            if typing.get_origin(annotation) is typing.Literal and isinstance(value, ast.Constant):
                allowed = typing.get_args(annotation)
                assert value.value in allowed, f"{name}={value.value!r} is not one of {allowed}"


def test_every_benchmark_writes_inside_the_output_folder(notebook):
    for call, keywords in calls_to(all_trees(notebook), "nsight.analyze.kernel"):
        prefix = keywords.get("output_prefix")
        assert prefix is not None, f"without output_prefix nsight writes to /tmp: {ast.unparse(call)[:100]}"
        text = ast.unparse(prefix)
        # child programs (the probe's main, section 9's cupti_child) are handed their prefix by the parent
        assert text.startswith("out_prefix(") or text == "prefix", f"output_prefix={text} escapes OUT_DIR"
    folders = [ast.unparse(call.args[2]) for call, _ in calls_to(all_trees(notebook), "run_cupti_child")]
    assert folders and all(f.startswith("out_prefix(") for f in folders), f"section 9's CUPTI child writes to {folders}"


def _nsight_attribute_chains(notebook):
    """Every nsight.X.Y the notebook uses, and names imported from nsight modules."""
    chains, from_imports = set(), set()
    for tree in all_trees(notebook):
        for node in ast.walk(tree):
            name = dotted(node) if isinstance(node, ast.Attribute) else None
            if name and name.startswith("nsight."):
                chains.add(name)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nsight"):
                from_imports.update((node.module, alias.name) for alias in node.names)
    return chains, from_imports


def test_every_nsight_name_used_exists_in_the_installed_library(notebook):
    chains, from_imports = _nsight_attribute_chains(notebook)
    assert "nsight.annotate" in chains and "nsight.experimental.collect" in chains
    for chain in sorted(chains):
        obj = nsight
        for part in chain.split(".")[1:]:
            assert hasattr(obj, part), f"{chain}: nsight {nsight.__version__} has no attribute {part!r}"
            obj = getattr(obj, part)
    for module, name in from_imports:
        assert hasattr(importlib.import_module(module), name), f"from {module} import {name}: no such name"


def test_requirements_never_ask_for_torch():
    for path in ROOT.glob("requirements*.txt"):
        assert not re.search(r"^\s*torch\b", path.read_text(), re.M), f"{path.name} would pull a (CUDA) torch"


def test_ruff_lint_passes_on_notebook_scripts_and_tests():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"ruff check failed; fix or run `ruff check --fix .`:\n{done.stdout}{done.stderr}"


def test_ruff_format_is_clean():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, f"run `ruff format .`:\n{done.stdout}{done.stderr}"


def _folded(cell) -> bool:
    return notebook_format.is_folded(cell)


def test_visible_code_cells_fit_on_a_screen(notebook):
    long_cells = {
        cell.get("id"): lines
        for cell in code_cells(notebook)
        if not _folded(cell) and (lines := sum(1 for line in cell.source.splitlines() if line.strip())) > 40
    }
    assert not long_cells, (
        f"visible code cells over 40 lines (split them, or fold plumbing with # @title): {long_cells}"
    )


@pytest.mark.parametrize("number", range(1, SECTION_COUNT + 1))
def test_each_section_ends_with_a_visible_verdict_cell_that_marks_it_ok(notebook, number):
    last = section_code_cells(notebook, number)[-1]
    calls = [node for node in ast.walk(ast.parse(cell_python(last))) if isinstance(node, ast.Call)]
    marks = [call for call in calls if dotted(call.func) == "verdict"]
    assert not _folded(last) and marks and ast.literal_eval(marks[0].args[0]) == number, (
        f"section {number}'s last code cell ({last.get('id')}) must be a visible cell that calls verdict({number}, "
        "...): the learner reads what the run showed, and the section is ok only once that cell has run"
    )


def test_learner_cells_do_not_call_the_harness(notebook):
    harness = ("record_figure", "build_summary", "report_summary", "section_entry")
    offenders = []
    for section, cell in cells_with_section(notebook):
        if cell.cell_type != "code" or _folded(cell) or section is None:
            continue
        names = {dotted(node) for node in ast.walk(ast.parse(cell_python(cell))) if isinstance(node, ast.Name)}
        if names & set(harness):
            offenders.append((cell.get("id"), sorted(names & set(harness))))
    assert not offenders, f"visible section code calls harness bookkeeping; move it to a folded cell: {offenders}"


def test_no_cell_binds_the_names_ipython_keeps_for_the_last_outputs(notebook):
    """IPython stops updating `_` (and `__`, `___`) for the rest of the session once a cell binds it at top level,
    so no cell, folded or visible, embedded module included, may bind one."""
    from support import module_level_names

    offenders = {
        cell.get("id"): sorted(module_level_names(cell_python(cell)) & {"_", "__", "___"})
        for cell in notebook.cells
        if cell.cell_type == "code"
    }
    offenders = {cell_id: names for cell_id, names in offenders.items() if names}
    assert not offenders, (
        f"these cells bind IPython's output names at top level, which breaks `_` for the rest of the session: "
        f"{offenders}; use another name (a loop variable inside a function, or `for unused in ...`)"
    )
