"""The notebook's code as Python, for the static tests."""

from __future__ import annotations

import ast

import nbformat
from IPython.core.inputtransformer2 import TransformerManager

_TRANSFORMER = TransformerManager()


def code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def cell_python(cell: nbformat.NotebookNode) -> str:
    """The cell's source with IPython magics and shell escapes turned into calls."""
    return _TRANSFORMER.transform_cell(cell.source)


def parsed_cells(nb: nbformat.NotebookNode) -> list[tuple[str, ast.Module]]:
    return [(cell.get("id", "?"), ast.parse(cell_python(cell))) for cell in code_cells(nb)]


def all_trees(nb: nbformat.NotebookNode) -> list[ast.Module]:
    """Every code cell, and the Python programs held in their string constants (the probe, section 9's child)."""
    trees = [tree for _, tree in parsed_cells(nb)]
    constants = [node.value for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Constant)]
    return trees + [ast.parse(text) for text in constants if isinstance(text, str) and "import nsight" in text]


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts, node = [node.attr, *parts], node.value
    return ".".join([node.id, *parts]) if isinstance(node, ast.Name) else None


def calls_to(trees: list[ast.Module], name: str) -> list[tuple[ast.Call, dict[str, ast.AST]]]:
    """Every call of `name` with its keywords, `**NAME` resolved where NAME is a {...} literal."""
    nodes = [node for tree in trees for node in ast.walk(tree)]
    literals = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(value := node.value, ast.Dict) and all(isinstance(k, ast.Constant) for k in value.keys):
                literals[node.targets[0].id] = {k.value: v for k, v in zip(value.keys, value.values, strict=True)}
    calls = []
    for node in (node for node in nodes if isinstance(node, ast.Call) and dotted(node.func) == name):
        keywords = {}
        for keyword in node.keywords:
            if keyword.arg is None and getattr(keyword.value, "id", None) not in literals:
                raise AssertionError(f"cannot resolve **{ast.unparse(keyword.value)} in {ast.unparse(node)}")
            keywords.update({keyword.arg: keyword.value} if keyword.arg else literals[keyword.value.id])
        calls.append((node, keywords))
    return calls
