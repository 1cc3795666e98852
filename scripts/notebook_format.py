#!/usr/bin/env python3
"""Keep the tutorial notebook canonical: nbformat 4.5 with cell ids, Colab GPU metadata, no outputs.

    python scripts/notebook_format.py --check [NOTEBOOK ...]   # exit 1 and list what is off
    python scripts/notebook_format.py --fix   [NOTEBOOK ...]   # rewrite in canonical form

Canonical: nbformat 4.5; unique cell ids; notebook metadata exactly CANONICAL_METADATA (Colab opens a notebook on a
CPU runtime unless asked for a GPU); code cells without outputs or execution count; no Colab save noise. A folded
cell (first line `# @title ...`) carries exactly `cellView: form` (Colab shows only its title) and the tag
`remove-input` (the HTML page drops its code); every other cell no metadata. No cell's source is ever changed (the
folded cells' code comes from plumbing/ through scripts/embed_modules.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

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
    return cell.get("cell_type") == "code" and "".join(cell.get("source", "")).lstrip().startswith("# @title")


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
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        new = {"cell_type": cell["cell_type"], "id": cell_id, "metadata": expected_cell_metadata(cell),
               "source": source}  # fmt: skip
        fixed["cells"].append({**new, "execution_count": None, "outputs": []} if cell["cell_type"] == "code" else new)
    return fixed


def render(notebook: dict) -> str:
    # The layout nbformat itself writes (indent 1, sorted keys), with the source split into lines.
    for cell in notebook["cells"]:
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


class NotANotebook(Exception):
    """A file that cannot be read as a notebook; the message says how to get a good one back."""


def load_notebook(path: Path) -> dict:
    """The notebook at path as parsed JSON, or NotANotebook saying why not and how to get a good one back."""
    restore = f"--fix cannot repair that: restore it (git checkout -- {path}) or save it again from Jupyter"
    if not path.is_file():
        raise NotANotebook("no such notebook")
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


def unreadable_cells(cells: list) -> list[str]:
    """What makes cells unusable (named by index and id): --fix would empty or guess them, so it refuses."""
    found = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            found.append(f"cell {index} is {type(cell).__name__}, not a cell")
            continue
        name, source = f"cell {index} (id {cell.get('id')!r})", cell.get("source")
        if cell.get("cell_type") not in ("code", "markdown", "raw"):
            found.append(f"{name} has cell_type {cell.get('cell_type')!r}")
        if "source" not in cell:
            found.append(f"{name} has no source")
        elif not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
            found.append(f"{name} has source {json.dumps(source)[:40]}, not text")
    return found


def problems(path: Path) -> list[str]:
    """What --fix would change in a notebook, named ([] if canonical)."""
    notebook = load_notebook(path)
    fixed = canonical(notebook)
    found = [f"{key} is {notebook.get(key)!r}, expected {fixed[key]!r}" for key in ("nbformat", "nbformat_minor",
             "metadata") if notebook.get(key) != fixed[key]]  # fmt: skip
    ids = [cell.get("id") for cell in notebook["cells"]]
    found += ["cell ids are missing or repeated"] * (None in ids or len(set(ids)) != len(ids))
    for index, (cell, want) in enumerate(zip(notebook["cells"], fixed["cells"], strict=True)):
        found += [f"cell {index} ({cell.get('id')}) has {key} {cell.get(key)!r}, expected {want[key] or 'none'}"
                  for key, default in (("metadata", {}), ("outputs", []), ("execution_count", None))
                  if key in want and cell.get(key, default) != want[key]]  # fmt: skip
    if not found and path.read_text() != render(fixed):
        found.append("JSON layout differs from the canonical one")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="report what is not canonical; exit 1 if anything")
    mode.add_argument("--fix", action="store_true", help="rewrite the notebooks in canonical form")
    parser.add_argument("notebooks", nargs="*", type=Path, default=[DEFAULT_NOTEBOOK])
    args = parser.parse_args(argv)
    status = 0
    for path in args.notebooks:
        try:
            notebook = load_notebook(path)
        except NotANotebook as error:
            print(f"{path}: {error}", file=sys.stderr)
            status = 2
            continue
        if args.fix:
            path.write_text(render(canonical(notebook)))
        found = [] if args.fix else problems(path)
        print("\n".join(f"{path}: {problem}" for problem in found) or f"{path}: canonical")
        if found:
            print(f"Fix with: python {os.path.relpath(__file__)} --fix {path}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
