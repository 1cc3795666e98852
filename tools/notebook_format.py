#!/usr/bin/env python3
"""Keep the tutorial notebook canonical: nbformat 4.5 with cell ids, Colab GPU metadata, no outputs.

    python tools/notebook_format.py --check|--fix [NOTEBOOK ...]   # exit 1 and list what is off | rewrite it

Folded cells (first line `# @title`, or Colab's older `#@title`) carry cellView form and FOLD_TAG, other cells not.
What a run or a view left (outputs, RUN_STATE metadata) is dropped; everything else a user made (attachments, tags,
other metadata) is kept. No source is ever changed. The file is replaced whole or not at all (tools/safe_io.py).
"""

import argparse
import json
import os
import re
import sys
import uuid
from pathlib import Path

import safe_io

REPO = Path(__file__).resolve().parent.parent
DEFAULT_NOTEBOOK = REPO / "nsight_python_t4_tutorial.ipynb"
CANONICAL_METADATA = {
    "accelerator": "GPU",
    "colab": {"gpuType": "T4", "provenance": []},
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
FOLD_TAG = "remove-input"  # the rendered page hides a folded cell's code
# What a run or a view leaves in a cell's metadata (Colab, Jupyter), not what a user made: dropped with the outputs.
RUN_STATE = ("colab", "collapsed", "execution", "executionInfo", "ExecuteTime", "outputId", "scrolled")
NOTEBOOK_RUN_STATE = ("widgets",)  # the widget state of the last run
CELL_KEYS = {"cell_type", "id", "metadata", "source", "attachments", "execution_count", "outputs"}  # nbformat 4.5
VALID_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # nbformat 4.5's cell id
TITLE = re.compile(r"#\s*@title\b")  # `# @title` and Colab's older `#@title` both fold a cell


def is_folded(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and bool(TITLE.match("".join(cell.get("source", "")).lstrip()))


def canonical_cell_metadata(cell: dict) -> dict:
    """The cell's metadata less the run state; cellView and the fold tag set as the cell's first line says."""
    kept = {key: value for key, value in cell.get("metadata", {}).items() if key not in RUN_STATE + ("cellView",)}
    tags = [tag for tag in kept.pop("tags", []) if tag != FOLD_TAG]
    if is_folded(cell):
        old_tags = cell.get("metadata", {}).get("tags", [])  # the fold tag where the user had it, else last
        tags = list(old_tags) if FOLD_TAG in old_tags else [*tags, FOLD_TAG]
        return {"cellView": "form", **kept, "tags": tags}
    return {**kept, "tags": tags} if tags else kept


def canonical(notebook: dict) -> dict:
    kept = {key: value for key, value in notebook.get("metadata", {}).items() if key not in NOTEBOOK_RUN_STATE}
    fixed = {"cells": [], "metadata": {**kept, **CANONICAL_METADATA}, "nbformat": 4, "nbformat_minor": 5}
    seen_ids: set[str] = set()
    for cell in notebook.get("cells", []):
        given = cell.get("id")
        valid = isinstance(given, str) and VALID_ID.fullmatch(given) and given not in seen_ids
        cell_id = given if valid else uuid.uuid4().hex[:8]
        seen_ids.add(cell_id)
        new = {
            "cell_type": cell["cell_type"],
            "id": cell_id,
            "metadata": canonical_cell_metadata(cell),
            "source": "".join(cell["source"]),
        }
        if "attachments" in cell:  # a pasted image: the user's content
            new["attachments"] = cell["attachments"]
        fixed["cells"].append({**new, "execution_count": None, "outputs": []} if cell["cell_type"] == "code" else new)
    return fixed


def render(notebook: dict) -> str:  # the layout nbformat writes
    for cell in notebook["cells"]:
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


class NotANotebook(Exception):
    pass


def load_notebook(path: Path) -> dict:
    """The notebook; NotANotebook naming what --fix would have to empty, drop or guess (a cell by index and id)."""
    restore = f"restore it (git checkout -- {safe_io.quoted(path)}) or save it again from Jupyter"
    text = safe_io.read_text(path, what="the notebook")  # FileRefused: a file that is no regular UTF-8 text
    try:
        notebook = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:  # RecursionError: JSON nested thousands deep
        reason = "it is nested too deep" if isinstance(error, RecursionError) else error
        raise NotANotebook(f"cannot read it as JSON ({reason}); --fix cannot repair that: {restore}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotANotebook(f"it is JSON but not a notebook (no list of cells at its top); {restore}")
    if not isinstance(notebook.get("metadata", {}), dict):
        raise NotANotebook(f"its metadata is {json.dumps(notebook['metadata'])[:40]}, not an object; {restore}")
    broken = []
    for index, cell in enumerate(notebook["cells"]):
        cell = cell if isinstance(cell, dict) else {"cell_type": type(cell).__name__}
        name, source = f"cell {index} (id {cell.get('id')!r})", cell.get("source")
        if cell.get("cell_type") not in ("code", "markdown", "raw"):
            broken.append(f"{name} has cell_type {cell.get('cell_type')!r}")
        if unknown := sorted(set(cell) - CELL_KEYS):  # --fix would drop them: the user removes them, knowingly
            broken.append(f"{name} has {', '.join(map(repr, unknown))}, which nbformat 4.5 does not know")
        metadata = cell.get("metadata", {})
        if not isinstance(metadata, dict) or not isinstance(metadata.get("tags", []), list):
            broken.append(f"{name} has metadata that is not an object with a list of tags")
        if "source" not in cell:
            broken.append(f"{name} has no source")
        elif not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
            broken.append(f"{name} has source {json.dumps(source)[:40]}, not text")
    if broken:
        raise NotANotebook(
            f"{'; '.join(broken)}. Give each cell a cell_type of code, markdown or raw, a source "
            f"(a string or a list of strings; [] for an empty cell) and only nbformat's fields, or "
            f"{restore}"
        )
    return notebook


def problems(path: Path, notebook: dict | None = None) -> list[str]:
    """What --fix would change in a notebook (notebook: its loaded content), named ([] if canonical)."""
    notebook = load_notebook(path) if notebook is None else notebook
    fixed = canonical(notebook)
    found = [
        f"{key} is {notebook.get(key)!r}, expected {fixed[key]!r}"
        for key in ("nbformat", "nbformat_minor", "metadata")
        if notebook.get(key) != fixed[key]
    ]
    for index, (cell, want) in enumerate(zip(notebook["cells"], fixed["cells"], strict=True)):  # id: missing, repeated
        found += [
            f"cell {index} ({cell.get('id')}) has {key} {cell.get(key)!r}, expected {want[key]!r}"
            for key in want
            if key != "source" and cell.get(key) != want[key]
        ]
    if not found and safe_io.read_text(path, what="the notebook") != render(fixed):
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
        except (NotANotebook, safe_io.FileRefused, *errors) as error:
            print(f"{path}: {error}", file=sys.stderr)
            status = 2
    return status


def write_notebook(path: Path, notebook: dict) -> None:
    """The rendered notebook over path, whole or not at all; NotANotebook naming a cell it cannot write, FileRefused
    a file it cannot write."""
    unwritable = [  # a lone surrogate, named with where it is
        f"cell {index} (id {cell.get('id')!r}) holds {where}: remove it in the notebook"
        for index, cell in enumerate(notebook["cells"])
        if (where := safe_io.unencodable("".join(cell["source"])))
    ]
    if unwritable:
        raise NotANotebook("; ".join(unwritable) + ". Nothing was written")
    safe_io.write_text(path, render(notebook), what="the notebook")


def check_or_fix(path: Path, notebook: dict, fix: bool) -> int:
    ran = sum(len(cell.get("outputs") or []) for cell in notebook["cells"])
    if fix and (ran or any(cell.get("execution_count") for cell in notebook["cells"])):  # a run's work: never dropped
        raise NotANotebook(
            f"holds what a run left ({ran} outputs, execution counts): --fix would delete it, so "
            "nothing was written. Fix the committed notebook, or a copy whose outputs you cleared"
        )
    if fix:
        write_notebook(path, canonical(notebook))
    found = [] if fix else problems(path, notebook)
    print("\n".join(f"{path}: {problem}" for problem in found) or f"{path}: canonical")
    if found:
        print(f"Fix with: python {safe_io.quoted(os.path.relpath(__file__))} --fix {safe_io.quoted(path)}")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__, "report what is not canonical (exit 1)", "rewrite in canonical form")
    return each_notebook(args, check_or_fix)


if __name__ == "__main__":
    sys.exit(main())
