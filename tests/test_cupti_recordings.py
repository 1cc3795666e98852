"""The CUPTI half's analysis cells (sections 2, 3, 5, 8 and 9) on real CUPTI data recorded on a GPU machine, and the
recorder's behaviour where it cannot record.

scripts/record_cupti.py ran the notebook's own cells with NSPY_TUTORIAL_PROFILER=cupti and saved what the run cells
bound. Here a real kernel runs the harness, section 1's names from the recording, the recorded variables and each
section's analysis and figure cells (by id, never copied); each section must stay ok and its figures physical.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, cell_by_id
from kernel_session import KernelSession

sys.path.insert(0, str(ROOT / "scripts"))
import record_cupti  # noqa: E402
import record_ncu  # noqa: E402

FOLDERS = record_cupti.cupti_recording_folders()
RECORD = "record one on the GPU runner with python3 scripts/record_cupti.py, then commit the folder it writes"


def test_the_recorder_stops_at_the_gpu_check_without_a_gpu_and_writes_nothing(tmp_path):
    no_gpu = tmp_path / "bin"
    no_gpu.mkdir()
    (no_gpu / "nvidia-smi").write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    (no_gpu / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{no_gpu}{os.pathsep}{os.environ['PATH']}", "NSPY_RECORD_WORK": str(tmp_path / "w")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/record_cupti.py"), "--dest", str(tmp_path / "dest")],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "section 1 failed in cell gpu-check" in done.stderr and "No NVIDIA GPU is visible" in done.stdout
    assert not (tmp_path / "dest").exists(), "nothing may be written where a recording belongs"


def test_the_plan_covers_exactly_the_sections_that_run_on_cupti():
    from plumbing.cells import CUPTI_SECTIONS

    sections = {number for number, _ in record_cupti.plan(record_ncu.load_cells())}
    assert sections == {1, *CUPTI_SECTIONS}


@pytest.fixture(params=FOLDERS or [None], ids=[f.name for f in FOLDERS] or ["no-recording"])
def recorded(request, notebook, tmp_path):
    if request.param is None:
        pytest.skip(f"no docs/verified/*/{record_cupti.RECORDING_FILE}: {RECORD}")
    session = KernelSession(env={"NSPY_TUTORIAL_OUT": str(tmp_path / "out"), "MPLBACKEND": "Agg"}, cwd=tmp_path)
    session.run(cell_by_id(notebook, "harness").source)
    session.run(record_cupti.cpu_section_one_source(request.param))
    yield session
    session.close()


@pytest.mark.parametrize("number", sorted(record_cupti.RECORDED))
def test_each_sections_analysis_runs_on_the_recording_and_its_figures_are_physical(notebook, recorded, number):
    cells = record_ncu.load_cells()
    for earlier in sorted(record_cupti.RECORDED):  # as in the notebook, a section may use what earlier ones bound
        if earlier < number:
            recorded.run(record_cupti.inject_source(earlier))
    recorded.run(cell_by_id(notebook, record_cupti.opener_id(number)).source)
    recorded.run(record_cupti.inject_source(number))
    analysis = record_cupti.analysis_cell_ids(cells, number)
    outputs = [recorded.run(cell_by_id(notebook, cell_id).source) for cell_id in analysis]
    section = recorded.value(f"SECTIONS[{number}]")
    assert section["status"] == "ok", f"section {number} on the CUPTI recording: {section['reason']}\n{outputs}"
    suspect = recorded.value(f"[f for f in FIGURES if f['section'] == {number} and f['check'] == 'SUSPECT']")
    assert not suspect, f"section {number}'s figures are outside the recorded GPU's physical limits: {suspect}"


def test_section_3s_bandwidth_counts_every_byte_the_add_moves(notebook, recorded):
    """A vector add of n floats reads two tensors and writes one: 3 * 4 * n bytes over the recorded kernel time."""
    number = 3
    recorded.run(cell_by_id(notebook, record_cupti.opener_id(number)).source)
    recorded.run(record_cupti.inject_source(number))
    for cell_id in record_cupti.analysis_cell_ids(record_ncu.load_cells(), number):
        recorded.run(cell_by_id(notebook, cell_id).source)
    n = 1 << 24
    add_ns = recorded.value(f"float(repeats_frame.query('Annotation == \"add\" and n == {n}').AvgValue.iloc[0])")
    figure = recorded.value("next(f for f in FIGURES if f['name'] == 'vector add 16M')")
    assert figure["value"] == pytest.approx(3 * 4 * n / add_ns, rel=1e-3), (
        f"section 3's GB/s must count two reads and one write of 4-byte floats over the kernel time: got "
        f"{figure['value']:.0f} GB/s for {add_ns:.0f} ns; check s3-record's byte count"
    )
