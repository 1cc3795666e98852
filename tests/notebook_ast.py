"""Read the notebook's code as Python: parsed cells, nsight calls and names, for the static tests."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import nbformat
from IPython.core.inputtransformer2 import TransformerManager

_TRANSFORMER = TransformerManager()


def code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def cell_python(cell: nbformat.NotebookNode) -> str:
    """The cell's source as plain Python, with IPython magics and shell escapes turned into calls."""
    return _TRANSFORMER.transform_cell(cell.source)


def parsed_cells(nb: nbformat.NotebookNode) -> list[tuple[str, ast.Module]]:
    return [(cell.get("id", "?"), ast.parse(cell_python(cell))) for cell in code_cells(nb)]


def embedded_scripts(tree: ast.AST) -> Iterator[ast.Module]:
    """Python programs held in string constants (the probe, section 9's CUPTI child), parsed."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import nsight" in node.value:
            yield ast.parse(node.value)


def all_trees(nb: nbformat.NotebookNode) -> list[ast.Module]:
    trees = [tree for _, tree in parsed_cells(nb)]
    return trees + [script for tree in trees for script in embedded_scripts(tree)]


def dotted(node: ast.AST) -> str | None:
    """'nsight.analyze.kernel' for an attribute chain rooted at a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def dict_literals(trees: list[ast.Module]) -> dict[str, dict[str, ast.AST]]:
    """name -> {key: value node} for every `name = dict(...)` or `name = {...}` with literal keys."""
    found = {}
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
                found[node.targets[0].id] = {kw.arg: kw.value for kw in value.keywords if kw.arg}
            elif isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) for k in value.keys):
                found[node.targets[0].id] = {k.value: v for k, v in zip(value.keys, value.values, strict=True)}
    return found


def calls_to(trees: list[ast.Module], name: str) -> list[tuple[ast.Call, dict[str, ast.AST]]]:
    """Every call of `name` (e.g. 'nsight.analyze.kernel') with its keywords, **spreads resolved."""
    literals = dict_literals(trees)
    calls = []
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and dotted(node.func) == name:
                keywords = {}
                for keyword in node.keywords:
                    if keyword.arg is not None:
                        keywords[keyword.arg] = keyword.value
                    elif isinstance(keyword.value, ast.Name) and keyword.value.id in literals:
                        keywords.update(literals[keyword.value.id])
                    else:
                        raise AssertionError(f"cannot resolve **{ast.unparse(keyword.value)} in {ast.unparse(node)}")
                calls.append((node, keywords))
    return calls
