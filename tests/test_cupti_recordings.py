"""The CUPTI half's analysis cells (sections 2, 3, 5, 8 and 9) on real CUPTI data recorded on a GPU machine, and the
recorder's behaviour where it cannot record.

scripts/record_cupti.py ran the notebook's own cells with NSPY_TUTORIAL_PROFILER=cupti and saved what the run cells
bound. Here a real kernel runs the harness, section 1's names from the recording, the recorded variables and each
section's analysis and figure cells (by id, never copied); each section must stay ok and its figures physical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import record_cupti
import recordings
from support import ROOT, RecordedNotebook

from plumbing.cells import CUPTI_SECTIONS, HARNESS, SECTION_PLAN, SETUP_HELPERS, section_of

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


def test_the_cupti_recorder_refuses_a_section_that_needs_nsight_compute_and_writes_nothing(tmp_path):
    env = {**os.environ, "NSPY_RECORD_WORK": str(tmp_path / "w")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/record_cupti.py"), "--sections", "9", "--dest", str(tmp_path / "dest")],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"records sections {sorted(CUPTI_SECTIONS)}, not [9]" in done.stderr, done.stderr
    assert not (tmp_path / "dest").exists() and not (tmp_path / "w").exists(), "a refused run must write nothing"


def test_the_plan_covers_exactly_the_sections_that_run_on_cupti():
    sections = {number for number, _, role in record_cupti.plan(recordings.load_cells()) if role != "prelude"}
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
        printed = "".join(
            cell["output"] for cell_id, cell in recording["cells"].items() if section_of(cell_id) == figure["section"]
        )
        assert f"{figure['name']}: {figure['value']:,.1f} {figure['unit']}" in printed, (
            f"{folder.name}: figure {figure['name']} = {figure['value']} is not what section {figure['section']}'s "
            f"cells printed ({printed.strip()[-300:]!r}): the recording mixes runs; {RECORD}"
        )


# ---------------------------------------------------------------- sections recorded alone, simulated on a CPU
def run_plan_on_a_cpu(sections, out, monkeypatch):
    """record_cupti.py --sections ... without a GPU: section 1's names come from the committed CUPTI recording (its
    cells check for a GPU first), then the rest of the plan runs for real. Returns (steps, runs, failed)."""
    if not FOLDERS:
        pytest.skip(f"no docs/verified/*/{recordings.RECORDING_FILES['cupti']}: {RECORD}")
    for name, value in {"NSPY_TUTORIAL_OUT": out, "NSPY_TUTORIAL_PROFILER": "cupti", "MPLBACKEND": "Agg",
                        "NSPY_NCU_INIT_AT_IMPORT": "0"}.items():  # fmt: skip
        monkeypatch.setenv(name, str(value))
    cells = recordings.load_cells()
    namespace = {"__name__": "__main__"}
    for cell_id in (HARNESS, SETUP_HELPERS):
        recordings.run_cell(namespace, recordings.cell_source(cells, cell_id), cell_id, echo=False)
    recordings.run_cell(namespace, recordings.cpu_section_one_source(FOLDERS[-1]), "section-one", echo=False)
    steps = [step for step in record_cupti.plan(cells, sections) if step[0] != 1]
    runs, _, failed = record_cupti.run_sections(namespace, cells, steps)
    return steps, runs, failed


@pytest.mark.parametrize("number", record_cupti.SECTIONS)
def test_a_section_recorded_alone_runs_on_a_cpu_up_to_its_first_step_that_needs_the_gpu(number, tmp_path, monkeypatch):
    """The shared define cells, a section N reads (from the recording) and N's own cells run: a NameError or KeyError
    before N's first profiled call or GPU-reading cell would otherwise wait for the runner."""
    steps, runs, failed = run_plan_on_a_cpu([number], tmp_path / "out", monkeypatch)
    first_gpu_step = next(
        cell_id for section, cell_id, role in steps if section == number and role in recordings.REPLACED_ON_CPU
    )
    last_line = {cell_id: run["output"].strip().splitlines()[-1] for cell_id, run in runs.items() if run.get("failed")}
    assert failed == {number: first_gpu_step}, (
        f"--sections {number} on a CPU must get as far as {first_gpu_step}, its first cell that needs the GPU; "
        f"it stopped at {failed}: {last_line}"
    )
    assert not last_line[first_gpu_step].startswith(("NameError", "KeyError")), last_line[first_gpu_step]


def test_a_section_whose_read_section_failed_is_failed_naming_it_and_runs_no_cell(tmp_path, monkeypatch):
    _, runs, failed = run_plan_on_a_cpu([5, 9], tmp_path / "out", monkeypatch)  # section 5 stops at s5-run here
    assert failed.get(9) == f"{failed[5]} (section 5, which it reads)", (
        f"section 9 reads section 5's sweep: with section 5 failed it must be FAILED naming it, got {failed}"
    )
    assert not [cell_id for cell_id in runs if cell_id.startswith("s9-") and runs[cell_id]["role"] != "prelude"]


@pytest.mark.skipif(not FOLDERS, reason=RECORD)
def test_a_recording_keeps_every_value_each_cell_bound_and_the_figures_of_the_recorded_sections_only():
    """record_cupti's recording of a run, remade from the committed run's own cells and namespace: what each cell
    bound (the frames the CPU suite's analysis reads) comes back unchanged, and only the recorded sections' figures
    are kept."""
    import pandas as pd

    committed = recordings.load_recording(FOLDERS[0])
    sections = sorted(int(number) for number in committed["sections"])
    runs = {
        cell_id: {"source": cell["source"], "output": cell["output"], "variables": cell["variables"],
                  "role": cell["role"]}
        for cell_id, cell in committed["cells"].items()
    }  # fmt: skip
    figures = recordings.decode(json.loads(recordings.recording_file(FOLDERS[0]).read_text())["figures"])
    other_section = {"section": 4, "name": "not recorded here", "value": 1.0, "check": "ok"}
    namespace = {
        "ENVIRONMENT": committed["environment"],
        "SECTIONS": {number: {"status": "ok", "reason": "", "headline": f"headline {number}"} for number in sections},
        "FIGURES": [*figures, other_section],
        "pd": pd,
    }
    made = record_cupti.recording_of(namespace, runs, {}, {}, sections, "0" * 40, "2026-12-01T00:00:00+00:00", 1.0)
    for cell_id, cell in committed["cells"].items():
        kept = {name: recordings.decode(value) for name, value in made["cells"][cell_id]["variables"].items()}
        assert sorted(kept) == sorted(cell["variables"]), f"{cell_id}: the recording lost what the cell bound"
        for name, value in cell["variables"].items():
            if isinstance(value, pd.DataFrame):
                pd.testing.assert_frame_equal(kept[name], value, obj=f"{cell_id}'s {name}")
    assert recordings.decode(made["figures"]) == figures, "the recorded sections' figures, and only theirs"
    assert {number: entry["status"] for number, entry in made["sections"].items()} == {
        str(number): "ok" for number in sections
    }


def test_the_recorder_exits_non_zero_when_a_section_failed_though_it_wrote_the_others(monkeypatch, tmp_path, capsys):
    failed = {8: SECTION_PLAN[8]["run"][0]}
    monkeypatch.setattr(record_cupti, "record", lambda dest, sections: (tmp_path, failed))
    assert record_cupti.main(["--dest", str(tmp_path)]) == 2
    assert f"cells failed: {failed}" in capsys.readouterr().err
    monkeypatch.setattr(record_cupti, "record", lambda dest, sections: (tmp_path, {}))
    assert record_cupti.main(["--dest", str(tmp_path)]) == 0


def test_recording_a_section_again_drops_its_old_settings_that_the_new_recording_no_longer_holds():
    """A setting a section's define cells now bind as a function (not a recordable value) must not keep the value an
    older recording held under that name, or the staleness check compares against a value no cell makes."""
    setting = next(iter(recordings.benchmark_setting_names(recordings.load_cells(), [4])))
    old = {"format": recordings.FORMAT, "mode": "ncu", "sections": {"4": {}}, "cells": {}, "calls": []}
    old["define_values"] = {setting: "an old value", "OTHER_SECTIONS_SETTING": 1}
    new = {**old, "define_values": {}}
    merged = recordings.merge(old, new, [4])["define_values"]
    assert setting not in merged, f"recordings.merge kept the old {setting!r} after section 4 was recorded again"
    assert merged == {"OTHER_SECTIONS_SETTING": 1}, f"a setting of a section not recorded again must stay: {merged}"
