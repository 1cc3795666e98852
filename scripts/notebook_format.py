#!/usr/bin/env python3
"""Keep the tutorial notebook canonical: nbformat 4.5 with cell ids, Colab GPU metadata, no outputs.

    python scripts/notebook_format.py --check|--fix [NOTEBOOK ...]   # exit 1 and list what is off | rewrite it

Folded cells (first line `# @title`) carry only FOLDED_CELL_METADATA, other cells none. No source is ever changed.
"""

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_NOTEBOOK = REPO / "nsight_python_t4_tutorial.ipynb"
CANONICAL_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []},
                      "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                      "language_info": {"name": "python"}}  # fmt: skip
FOLDED_CELL_METADATA = {"cellView": "form", "tags": ["remove-input"]}


def is_folded(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and "".join(cell.get("source", "")).lstrip().startswith("# @title")


def canonical(notebook: dict) -> dict:
    fixed = {"cells": [], "metadata": CANONICAL_METADATA, "nbformat": 4, "nbformat_minor": 5}
    seen_ids: set[str] = set()
    for cell in notebook.get("cells", []):
        cell_id = cell.get("id") if cell.get("id") and cell["id"] not in seen_ids else uuid.uuid4().hex[:8]
        seen_ids.add(cell_id)
        new = {"cell_type": cell["cell_type"], "id": cell_id, "metadata": dict(FOLDED_CELL_METADATA) if is_folded(cell)
               else {}, "source": "".join(cell["source"])}  # fmt: skip
        fixed["cells"].append({**new, "execution_count": None, "outputs": []} if cell["cell_type"] == "code" else new)
    return fixed


def render(notebook: dict) -> str:  # the layout nbformat writes
    for cell in notebook["cells"]:
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


class NotANotebook(Exception):
    pass


def load_notebook(path: Path) -> dict:
    """The notebook; NotANotebook naming what --fix would have to empty or guess (a cell by index and id)."""
    restore = f"restore it (git checkout -- {path}) or save it again from Jupyter"
    try:
        notebook = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise NotANotebook(f"cannot read it as JSON ({error}); --fix cannot repair that: {restore}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotANotebook(f"it is JSON but not a notebook (no list of cells at its top); {restore}")
    broken = []
    for index, cell in enumerate(notebook["cells"]):
        cell = cell if isinstance(cell, dict) else {"cell_type": type(cell).__name__}
        name, source = f"cell {index} (id {cell.get('id')!r})", cell.get("source")
        if cell.get("cell_type") not in ("code", "markdown", "raw"):
            broken.append(f"{name} has cell_type {cell.get('cell_type')!r}")
        if not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
            broken.append(f"{name} has source {json.dumps(source)[:40]}, not text" if "source" in cell else
                          f"{name} has no source")  # fmt: skip
    if broken:
        raise NotANotebook(f"{'; '.join(broken)}. Give each cell a cell_type of code, markdown or raw and a source "
                           f"(a string or a list of strings; [] for an empty cell), or {restore}")  # fmt: skip
    return notebook


def problems(path: Path, notebook: dict | None = None) -> list[str]:
    """What --fix would change in a notebook (notebook: its loaded content), named ([] if canonical)."""
    notebook = load_notebook(path) if notebook is None else notebook
    fixed = canonical(notebook)
    found = [f"{key} is {notebook.get(key)!r}, expected {fixed[key]!r}" for key in ("nbformat", "nbformat_minor",
             "metadata") if notebook.get(key) != fixed[key]]  # fmt: skip
    for index, (cell, want) in enumerate(zip(notebook["cells"], fixed["cells"], strict=True)):  # id: missing, repeated
        found += [f"cell {index} ({cell.get('id')}) has {key} {cell.get(key)!r}, expected {want[key]!r}"
                  for key in want if key != "source" and cell.get(key) != want[key]]  # fmt: skip
    if not found and path.read_text() != render(fixed):
        found.append("JSON layout differs from the canonical one")
    return found


def parse_args(argv: list[str] | None, doc: str, check: str, fix: str) -> argparse.Namespace:  # embed_modules' too
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help=check)
    mode.add_argument("--fix", action="store_true", help=fix)
    parser.add_argument("notebooks", nargs="*", type=Path, default=[DEFAULT_NOTEBOOK])
    return parser.parse_args(argv)


def each_notebook(args: argparse.Namespace, handle, errors: tuple = ()) -> int:
    """handle(path, notebook, fix) for each notebook given (0: as it should be, 1: not); 2 where one cannot be read."""
    status = 0
    for path in args.notebooks:
        try:
            status = max(status, handle(path, load_notebook(path), args.fix))
        except (NotANotebook, *errors) as error:
            print(f"{path}: {error}", file=sys.stderr)
            status = 2
    return status


def check_or_fix(path: Path, notebook: dict, fix: bool) -> int:
    if fix:
        path.write_text(render(canonical(notebook)))
    found = [] if fix else problems(path, notebook)
    print("\n".join(f"{path}: {problem}" for problem in found) or f"{path}: canonical")
    if found:
        print(f"Fix with: python {os.path.relpath(__file__)} --fix {path}")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__, "report what is not canonical (exit 1)", "rewrite in canonical form")
    return each_notebook(args, check_or_fix)


if __name__ == "__main__":
    sys.exit(main())
