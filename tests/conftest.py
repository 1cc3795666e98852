"""Shared fixtures for the CPU suite and the GPU run (shared helpers live in support.py)."""

from __future__ import annotations

import sys

import nbformat
import pytest
from support import NOTEBOOK

from plumbing.cells import SECTION_PLAN


@pytest.fixture(scope="session")
def notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


FAKE_NCU = """#!{python}
# Stands in for ncu: records its command line and what the inner would have written, then exits.
import json, sys
from pathlib import Path
args = sys.argv[1:]
Path({log!r}).write_text(json.dumps(args))
work, call = Path(args[args.index("--work") + 1]), args[args.index("--call") + 1]  # call: <section>-<k>
Path(work, "calls", call + ".session.json").write_text(json.dumps({{"session_s": 0.5}}))
print("==PROF== Report:", Path(work, "out", "s4", "report.ncu-rep"), "by", sys.executable)  # as ncu names its -o
"""


@pytest.fixture
def patched(tmp_path, monkeypatch):
    """The outer recorder's patches on the installed nsight, with a fake ncu; undone afterwards."""
    import ncu_launch  # here, not at the top: the GPU run's pytest has no nsight of its own
    from nsight.collection import ncu as nsight_ncu

    log = tmp_path / "ncu_args.json"
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, log=str(log)))
    fake.chmod(0o755)
    work = tmp_path / "work"
    (work / "calls").mkdir(parents=True)
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(work / "out"))
    # The recorder imports nsight with NSPY_NCU_INIT_AT_IMPORT=0; this test process did not, and has no ncu.
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)
    calls = ncu_launch.ProfiledCalls(work, "outer", ncu=str(fake), log=lambda *_: None)
    calls.install()
    calls.where = (4, SECTION_PLAN[4]["run"][0])
    yield calls, log, work
    calls.uninstall()


def _recordings(*kinds):
    import recordings

    return [folder for kind in kinds for folder in recordings.recording_folders(kind)]


def _recorded_notebook(request, notebook, tmp_path_factory):
    from support import RecordedNotebook

    runner = RecordedNotebook(notebook, request.param, tmp_path_factory.mktemp(request.param.name))
    yield runner
    runner.close()


@pytest.fixture(scope="module", params=_recordings("ncu"), ids=lambda folder: folder.name)
def ncu_recorded(request, notebook, tmp_path_factory):
    """The notebook's harness and define cells in a real kernel, on each committed Nsight Compute recording; a test
    runs a section there with .section(N) and reads its names with .value(expression)."""
    yield from _recorded_notebook(request, notebook, tmp_path_factory)


@pytest.fixture(scope="module", params=_recordings("ncu", "cupti"), ids=lambda folder: folder.name)
def recorded(request, notebook, tmp_path_factory):
    """The same on every committed recording of either backend, for a section that runs on both."""
    yield from _recorded_notebook(request, notebook, tmp_path_factory)
