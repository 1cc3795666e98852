#!/usr/bin/env python3
"""Keep the tutorial notebook canonical: nbformat 4.5 with cell ids, Colab GPU metadata, no outputs.

    python scripts/notebook_format.py --check [NOTEBOOK ...]   # exit 1 and list what is off
    python scripts/notebook_format.py --fix   [NOTEBOOK ...]   # rewrite in canonical form

Canonical means: nbformat 4.5; every cell has a unique id; notebook metadata holds exactly
`accelerator: GPU`, `colab: {gpuType: T4, provenance: []}` (Colab opens a notebook on a CPU runtime
unless asked for a GPU), the python3 kernelspec and language_info; code cells have no outputs and
no execution count; cells carry no Colab save noise (executionInfo, outputId, widget state).

Plumbing is folded the Colab way: a code cell whose first line is `# @title ...` carries exactly
`cellView: form` (Colab shows only its title) and the tag `remove-input` (the HTML rendering drops
its code, through nbconvert's TagRemovePreprocessor). Every other cell carries no metadata at all.

Plumbing lives in modules (plumbing/*.py), embedded into folded cells. A folded cell whose second line reads

    # Source: plumbing/cells.py, plumbing/harness.py (embedded by scripts/notebook_format.py)

holds exactly those modules' code after it (without docstrings, `from __future__` and `from plumbing...` imports:
the names come from the cell that embeds that module); `path as NAME` embeds a module's text as the
string constant NAME instead (a program the notebook writes to disk and runs). --fix rewrites only such cells;
--check names each cell that differs from its modules.

"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_NOTEBOOK = REPO / "nsight_python_t4_tutorial.ipynb"
CANONICAL_METADATA = {
    "accelerator": "GPU",
    "colab": {"gpuType": "T4", "provenance": []},
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
# The only cell metadata a cell may carry: that of a folded plumbing cell. Everything else is noise.
FOLDED_CELL_METADATA = {"cellView": "form", "tags": ["remove-input"]}


def is_folded(cell: dict) -> bool:
    """A code cell that Colab folds: its first line is a `# @title` form title."""
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    return cell.get("cell_type") == "code" and source.lstrip().startswith("# @title")


# ---------------------------------------------------------------- modules embedded into folded cells
GENERATED_NOTE = "(embedded by scripts/notebook_format.py)"  # edit the module, not the cell
# A Source line longer than ruff's line length ends with ruff's marker that allows it (E501).
LONG_LINE_NOQA = "  # " + "noqa" + ": E501"  # in parts: ruff reads a marker anywhere in a line, strings included
SOURCE_LINE = re.compile(
    r"^# Source: (?P<spec>.+?) " + re.escape(GENERATED_NOTE) + f"(?:{re.escape(LONG_LINE_NOQA)})?$"
)
EMBEDDED_ITEM = re.compile(r"^(?P<path>plumbing/[a-z_]+\.py|requirements\.txt)(?: as (?P<name>[A-Z][A-Z0-9_]*))?$")
DATA_FILES = ("requirements.txt",)  # embedded as their text, under a NAME, never as code


class EmbeddingError(ValueError):
    """A folded cell names a module that cannot be embedded; the message says which and why."""


def embedded_modules(source: str) -> list[tuple[str, str | None]]:
    """[(module path, constant name or None)] that a folded cell's Source line names; [] for other cells."""
    lines = source.split("\n", 2)
    match = SOURCE_LINE.match(lines[1]) if len(lines) > 1 and lines[0].startswith("# @title") else None
    if match is None:
        return []
    items = []
    for item in match.group("spec").split(", "):
        parsed = EMBEDDED_ITEM.match(item.strip())
        if parsed is None or (parsed.group("path") in DATA_FILES and not parsed.group("name")):
            raise EmbeddingError(
                f"cannot read {item!r} in {lines[1]!r}: expected plumbing/<name>.py [as NAME], requirements.txt as NAME"
            )
        items.append((parsed.group("path"), parsed.group("name")))
    return items


def _docstring(body: list[ast.stmt]) -> ast.stmt | None:
    first = body[0] if body else None
    is_text = (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    )
    return first if is_text and len(body) > 1 else None


def module_code(text: str, embedded_names=()) -> str:
    """A module's code for a notebook cell: no docstrings (the module keeps them for the engineers who read it),
    no `from __future__` or `from plumbing...` imports, and no assignment to a name the cell embeds as a constant
    (the module reads that file itself; the cell holds its text)."""
    tree = ast.parse(text)
    drop = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(target, ast.Name) and target.id in embedded_names for target in targets):
            drop.update(range(node.lineno, node.end_lineno + 1))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            docstring = _docstring(node.body)
            if docstring is not None:
                drop.update(range(docstring.lineno, docstring.end_lineno + 1))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("__future__", "plumbing"):
            drop.update(range(node.lineno, node.end_lineno + 1))
    lines = text.splitlines()
    kept = []
    for number, line in enumerate(lines, start=1):
        after_dropped = number - 1 in drop and not line.strip()
        if number in drop or after_dropped:
            drop.add(number)  # a blank line after a dropped statement goes with it
        else:
            kept.append(line)
    return "\n".join(kept).strip("\n")


def module_constant(name: str, text: str, path: str) -> str:
    """NAME = r\"\"\"<the module's code>\"\"\": a program the notebook writes to a file and runs (or data's text)."""
    code = text.strip("\n") if path in DATA_FILES else module_code(text)
    if '"""' in code or code.endswith("\\"):
        raise EmbeddingError(f"{path} cannot be embedded as {name}: its code holds a triple quote or ends with \\")
    return f'{name} = r"""\n{code}\n"""'


def generated_source(source: str, repo: Path = REPO) -> str | None:
    """What a folded cell naming modules must hold: its title, its Source line, the modules. None for others."""
    modules = embedded_modules(source)
    if not modules:
        return None
    parts = []
    constants = {name for _, name in modules if name}
    for path, name in modules:
        if not (repo / path).is_file():
            raise EmbeddingError(f"{path} does not exist (named in the cell {source.splitlines()[0]!r})")
        text = (repo / path).read_text()
        parts.append(module_constant(name, text, path) if name else module_code(text, constants))
    head = "\n".join(source.split("\n", 2)[:2])
    return head + "\n" + "\n\n\n".join(parts)


def expected_cell_metadata(cell: dict) -> dict:
    return dict(FOLDED_CELL_METADATA) if is_folded(cell) else {}


def canonical(notebook: dict) -> dict:
    """Return the canonical form of a notebook given as parsed JSON."""
    fixed = {"cells": [], "metadata": CANONICAL_METADATA, "nbformat": 4, "nbformat_minor": 5}
    seen_ids: set[str] = set()
    for cell in notebook.get("cells", []):
        cell_id = cell.get("id")
        if not cell_id or cell_id in seen_ids:
            cell_id = uuid.uuid4().hex[:8]
        seen_ids.add(cell_id)
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        if cell["cell_type"] == "code":
            source = generated_source(source) or source
        new = {
            "cell_type": cell["cell_type"],
            "id": cell_id,
            "metadata": expected_cell_metadata(cell),
            "source": source,
        }
        if cell["cell_type"] == "code":
            new["execution_count"] = None
            new["outputs"] = []
        fixed["cells"].append(new)
    return fixed


def render(notebook: dict) -> str:
    # The layout nbformat itself writes (indent 1, sorted keys), with the source split into lines.
    for cell in notebook["cells"]:
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


class NotANotebook(Exception):
    """A file --check and --fix cannot read as a notebook; the message says what to do."""


def load_notebook(path: Path) -> dict:
    """The notebook at path as parsed JSON, or NotANotebook saying why not and how to get a good one back."""
    restore = f"--fix cannot repair that: restore it (git checkout -- {path}) or save it again from Jupyter"
    try:
        notebook = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise NotANotebook(f"cannot read it as JSON ({error}); {restore}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotANotebook(f"it is JSON but not a notebook (no list of cells at its top); {restore}")
    broken = unreadable_cells(notebook["cells"])
    if broken:
        raise NotANotebook(
            f"{'; '.join(broken)}. Give each cell a cell_type of code, markdown or raw and a source (a string or a "
            f"list of strings; [] for an empty cell), or {restore.removeprefix('--fix cannot repair that: ')}"
        )
    return notebook


CELL_TYPES = ("code", "markdown", "raw")  # nbformat 4's cell types


def unreadable_cells(cells: list) -> list[str]:
    """What makes cells unusable (named by index and id): --fix would empty or guess them, so it refuses."""
    found = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            found.append(f"cell {index} is {type(cell).__name__}, not a cell")
            continue
        name = f"cell {index} (id {cell.get('id')!r})"
        if cell.get("cell_type") not in CELL_TYPES:
            found.append(f"{name} has cell_type {cell.get('cell_type')!r}")
        source = cell.get("source")
        if "source" not in cell:
            found.append(f"{name} has no source")
        elif not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
            found.append(f"{name} has source {json.dumps(source)[:40]}, not text")
    return found


def problems(path: Path) -> list[str]:
    """Human-readable differences between a notebook and its canonical form ([] if canonical)."""
    notebook = load_notebook(path)
    found = []
    if (notebook.get("nbformat"), notebook.get("nbformat_minor")) != (4, 5):
        found.append(f"nbformat is {notebook.get('nbformat')}.{notebook.get('nbformat_minor')}, not 4.5")
    metadata = notebook.get("metadata", {})
    for key, value in CANONICAL_METADATA.items():
        if metadata.get(key) != value:
            found.append(f"metadata.{key} is {metadata.get(key)!r}, expected {value!r}")
    extra = sorted(set(metadata) - set(CANONICAL_METADATA))
    if extra:
        found.append(f"extra notebook metadata: {', '.join(extra)}")
    ids = [cell.get("id") for cell in notebook.get("cells", [])]
    if None in ids or len(set(ids)) != len(ids):
        found.append("cell ids are missing or repeated")
    for index, cell in enumerate(notebook.get("cells", [])):
        if cell.get("outputs"):
            found.append(f"cell {index} ({cell.get('id')}) has outputs")
        if cell.get("execution_count") is not None:
            found.append(f"cell {index} ({cell.get('id')}) has an execution count")
        if cell.get("metadata", {}) != expected_cell_metadata(cell):
            want = expected_cell_metadata(cell) or "none"
            found.append(f"cell {index} ({cell.get('id')}) has metadata {cell.get('metadata')!r}, expected {want}")
        found += embedding_problems(index, cell)
    if not found and path.read_text() != render(canonical(notebook)):
        found.append("JSON layout differs from the canonical one")
    return found


def embedding_problems(index: int, cell: dict) -> list[str]:
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    if cell.get("cell_type") != "code":
        return []
    try:
        expected = generated_source(source)
    except EmbeddingError as error:
        return [f"cell {index} ({cell.get('id')}): {error}"]
    if expected is None or expected == source:
        return []
    modules = ", ".join(path for path, _ in embedded_modules(source))
    return [f"cell {index} ({cell.get('id')}) differs from {modules}: edit the module, then run --fix"]


def this_script() -> str:
    """This script's path as the user can type it from where they are."""
    script = Path(__file__).resolve()
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="report what is not canonical; exit 1 if anything")
    mode.add_argument("--fix", action="store_true", help="rewrite the notebooks in canonical form")
    parser.add_argument("notebooks", nargs="*", type=Path, default=[DEFAULT_NOTEBOOK])
    args = parser.parse_args(argv)
    status = 0
    for path in args.notebooks:
        if not path.is_file():
            print(f"{path}: no such notebook", file=sys.stderr)
            status = 2
            continue
        try:
            notebook = load_notebook(path)
        except NotANotebook as error:
            print(f"{path}: {error}", file=sys.stderr)
            status = 2
            continue
        if args.fix:
            try:
                fixed = render(canonical(notebook))
            except EmbeddingError as error:
                print(f"{path}: {error}", file=sys.stderr)
                status = 1
                continue
            path.write_text(fixed)
            print(f"{path}: canonical")
            continue
        found = problems(path)
        for problem in found:
            print(f"{path}: {problem}")
        if found:
            print(f"Fix with: python {this_script()} --fix {path}")
            status = 1
        else:
            print(f"{path}: canonical")
    return status


if __name__ == "__main__":
    sys.exit(main())
