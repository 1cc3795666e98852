"""Shared fixtures for the CPU suite and the GPU run (shared helpers live in support.py)."""

import fakes
import nbformat
import pytest
from support import NOTEBOOK

from plumbing.cells import SECTION_PLAN


@pytest.fixture(scope="session")
def notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


@pytest.fixture
def ncu_work(tmp_path, monkeypatch):
    """A recorder's scratch folder (calls/ made, out/ the output folder), this process's nsight as the recorder's."""
    from nsight.collection import ncu as nsight_ncu  # here, not at the top: the GPU run's pytest has no nsight

    (work := tmp_path / "work").joinpath("calls").mkdir(parents=True)
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(work / "out"))
    # The recorder imports nsight with NSPY_NCU_INIT_AT_IMPORT=0; this test process did not, and has no ncu.
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)
    return work


@pytest.fixture
def patched(tmp_path, ncu_work):
    """The outer recorder's patches on the installed nsight, with a fake ncu; undone afterwards."""
    import ncu_launch  # here, not at the top: the GPU run's pytest has no nsight of its own

    work, log = ncu_work, tmp_path / "ncu_args.json"
    fake = fakes.ncu(tmp_path, "2025.3.1", log=log)  # the runner's
    calls = ncu_launch.ProfiledCalls(work, "outer", ncu=str(fake), log=lambda *_: None)
    calls.install()
    calls.where = (4, SECTION_PLAN[4]["run"][0])
    yield calls, log, work
    calls.uninstall()
