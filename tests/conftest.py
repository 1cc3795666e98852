"""Shared fixtures for the CPU suite and the GPU run (shared helpers live in support.py)."""

import nbformat
import pytest
from support import NOTEBOOK


@pytest.fixture(scope="session")
def notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)
