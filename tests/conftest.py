"""Shared fixtures for the CPU suite and the GPU run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "nsight_python_t4_tutorial.ipynb"


def gpu_listing() -> str:
    """What `nvidia-smi -L` lists, or '' when there is no NVIDIA GPU (or no driver)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 and "GPU" in done.stdout else ""


@pytest.fixture(scope="session")
def notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def cell_by_id(nb: nbformat.NotebookNode, cell_id: str) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            return cell
    raise AssertionError(f"the notebook has no cell with id {cell_id!r}; tests address cells by id")


SECTION_HEADING = re.compile(r"^## (\d+)\. ")


def cells_with_section(nb: nbformat.NotebookNode):
    """(section number or None, cell) for every cell, by the '## N.' heading above it (None after other '## ')."""
    number = None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            match = SECTION_HEADING.match(cell.source)
            number = int(match.group(1)) if match else None
        yield number, cell


def section_code_cells(nb: nbformat.NotebookNode, number: int) -> list[nbformat.NotebookNode]:
    """The code cells under the '## {number}.' heading, in order."""
    return [cell for section, cell in cells_with_section(nb) if section == number and cell.cell_type == "code"]


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())
