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
import record_cupti
import recordings
from support import ROOT, RecordedNotebook

from plumbing.cells import CUPTI_SECTIONS

FOLDERS = recordings.recording_folders("cupti")
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
    sections = {number for number, _, _ in record_cupti.plan(recordings.load_cells())}
    assert sections == {1, *CUPTI_SECTIONS}


def test_a_section_the_recorder_does_not_record_is_refused_with_the_ones_it_does():
    done = subprocess.run([sys.executable, str(ROOT / "scripts/record_cupti.py"), "--plan", "--sections", "4"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"records sections {sorted(CUPTI_SECTIONS)}, not [4]" in done.stderr, done.stderr


@pytest.fixture(scope="module", params=FOLDERS or [None], ids=[f.name for f in FOLDERS] or ["no-recording"])
def recorded(request, notebook, tmp_path_factory):
    if request.param is None:
        pytest.skip(f"no docs/verified/*/{recordings.RECORDING_FILES['cupti']}: {RECORD}")
    runner = RecordedNotebook(notebook, request.param, tmp_path_factory.mktemp(request.param.name))
    yield runner
    runner.close()


@pytest.mark.parametrize("number", sorted(CUPTI_SECTIONS))
def test_each_sections_analysis_runs_on_the_recording_and_its_figures_are_physical(recorded, number):
    recorded.section(number)
    suspect = recorded.value(f"[f for f in FIGURES if f['section'] == {number} and f['check'] == 'SUSPECT']")
    assert not suspect, f"section {number}'s figures are outside the recorded GPU's physical limits: {suspect}"


def test_section_3s_bandwidth_counts_every_byte_the_add_moves(recorded):
    """A vector add of n floats reads two tensors and writes one: 3 * 4 * n bytes over the recorded kernel time."""
    recorded.section(3)
    n = 1 << 24
    add_ns = recorded.value(f"float(repeats_frame.query('Annotation == \"add\" and n == {n}').AvgValue.iloc[0])")
    figure = recorded.value("next(f for f in FIGURES if f['name'] == 'vector add 16M')")
    assert figure["value"] == pytest.approx(3 * 4 * n / add_ns, rel=1e-3), (
        f"section 3's GB/s must count two reads and one write of 4-byte floats over the kernel time: got "
        f"{figure['value']:.0f} GB/s for {add_ns:.0f} ns; check s3-record's byte count"
    )


def test_recording_sections_over_an_older_recording_keeps_no_figure_of_the_sections_recorded_again():
    figure = {"name": "fp32 matmul 2048", "unit": "TFLOP/s"}
    older = recordings.encode([{**figure, "section": 2, "value": 1.0}, {"section": 3, "value": 3.0}])
    old = {"format": recordings.FORMAT, "mode": "cupti", "sections": {"2": {}, "3": {}}, "cells": {}, "calls": []}
    old["figures"] = older
    new = {**old, "sections": {"2": {}}, "figures": recordings.encode([{**figure, "section": 2, "value": 2.0}])}
    merged = recordings.decode(recordings.merge(old, new, [2])["figures"])
    assert [(f["section"], f["value"]) for f in merged] == [(2, 2.0), (3, 3.0)], (
        f"recordings.merge must replace a re-recorded section's figures and keep the others: got {merged}"
    )


@pytest.mark.parametrize("folder", recordings.recording_folders("cupti") + recordings.recording_folders("ncu"),
                         ids=lambda folder: folder.name)  # fmt: skip
def test_each_recorded_figure_is_once_in_the_recording_and_is_the_one_its_section_printed(folder):
    recording = recordings.load_recording(folder)
    figures = recordings.decode(recording["figures"])
    names = [(figure["section"], figure["name"]) for figure in figures]
    assert len(names) == len(set(names)), f"{folder.name}: figures recorded twice {sorted(names)}: {RECORD}"
    for figure in figures:
        printed = recording["cells"][f"s{figure['section']}-record"]["output"]
        assert f"{figure['value']:,.1f} {figure['unit']}" in printed, (
            f"{folder.name}: figure {figure['name']} = {figure['value']} is not what section {figure['section']}'s "
            f"record cell printed ({printed.strip()[:300]!r}): the recording mixes runs; {RECORD}"
        )
