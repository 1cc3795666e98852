"""Shared fixtures for the CPU suite and the GPU run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from plumbing.cells import section_of

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


def cells_with_section(nb: nbformat.NotebookNode):
    """(section number or None, cell) for every cell, by the cell table in plumbing/cells.py."""
    for cell in nb.cells:
        yield section_of(cell.get("id")), cell


def section_code_cells(nb: nbformat.NotebookNode, number: int) -> list[nbformat.NotebookNode]:
    """The code cells of section `number`, in order."""
    return [cell for section, cell in cells_with_section(nb) if section == number and cell.cell_type == "code"]


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())
