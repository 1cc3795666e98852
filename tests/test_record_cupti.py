"""scripts/record_cupti.py (and record_ncu.py where they share an edge) on a CPU: where it cannot record it says so
and writes nothing; a section recorded alone gets what it reads; a recording keeps what each cell bound."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import record_cupti
import recordings
from support import ROOT

from plumbing.cells import CUPTI_SECTIONS, HARNESS, SECTION_PLAN, SETUP_HELPERS

FOLDERS = recordings.recording_folders("cupti")
RECORD = "record one on the GPU runner with python3 scripts/record_cupti.py, then commit the folder it writes"


@pytest.mark.parametrize(
    ("script", "smi", "said"),
    [
        ("record_cupti.py", "echo 'No devices were found'; exit 6", "section 1 failed in cell gpu-check"),
        ("record_ncu.py", "exit 9", "no NVIDIA GPU here"),
    ],
)
def test_a_recorder_without_a_gpu_stops_with_exit_2_says_so_and_writes_nothing(tmp_path, script, smi, said):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvidia-smi").write_text(f"#!/bin/sh\n{smi}\n")
    (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "NSPY_RECORD_WORK": "w"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--dest", "dest", "--sections", "2"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "dest").exists(), "nothing may be written where a recording belongs"


@pytest.mark.parametrize("args", [["--sections", "9", "--dest", "dest"], ["--plan", "--sections", "4"]])
def test_the_cupti_recorder_refuses_a_section_that_needs_nsight_compute_naming_the_ones_it_records(tmp_path, args):
    done = subprocess.run([sys.executable, str(ROOT / "scripts/record_cupti.py"), *args], capture_output=True,
                          text=True, env={**os.environ, "NSPY_RECORD_WORK": "w"}, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"records sections {sorted(CUPTI_SECTIONS)}, not [{args[args.index('--sections') + 1]}]" in done.stderr, (
        done.stderr
    )
    assert not list(tmp_path.iterdir()), "a refused run must write nothing"
    sections = {number for number, _, role in record_cupti.plan(recordings.load_cells()) if role != "prelude"}
    assert sections == {1, *CUPTI_SECTIONS}, f"record_cupti's plan covers sections {sorted(sections)}"


def run_plan_on_a_cpu(sections, out, monkeypatch):
    """record_cupti.py --sections ... without a GPU: section 1's names from the committed CUPTI recording, then the
    rest of the plan for real. Returns (steps, runs, failed)."""
    for name, value in {"NSPY_TUTORIAL_OUT": out, "NSPY_TUTORIAL_PROFILER": "cupti", "MPLBACKEND": "Agg",
                        "NSPY_NCU_INIT_AT_IMPORT": "0"}.items():  # fmt: skip
        monkeypatch.setenv(name, str(value))
    cells, namespace = recordings.load_cells(), {"__name__": "__main__"}
    for cell_id in (HARNESS, SETUP_HELPERS):
        recordings.run_cell(namespace, recordings.cell_source(cells, cell_id), cell_id, echo=False)
    recordings.run_cell(namespace, recordings.cpu_section_one_source(FOLDERS[-1]), "section-one", echo=False)
    steps = [step for step in record_cupti.plan(cells, sections) if step[0] != 1]
    runs, _, failed = record_cupti.run_sections(namespace, cells, steps)
    return steps, runs, failed


@pytest.mark.parametrize("number", record_cupti.SECTIONS)
def test_a_section_recorded_alone_runs_on_a_cpu_up_to_its_first_step_that_needs_the_gpu(number, tmp_path, monkeypatch):
    steps, runs, failed = run_plan_on_a_cpu([number], tmp_path / "out", monkeypatch)
    first_gpu = next(cell for section, cell, role in steps if section == number and role in recordings.REPLACED_ON_CPU)
    last_line = {cell_id: run["output"].strip().splitlines()[-1] for cell_id, run in runs.items() if run.get("failed")}
    assert failed == {number: first_gpu}, (
        f"--sections {number} on a CPU stopped at {failed}, not {first_gpu}: {last_line}"
    )
    assert not last_line[first_gpu].startswith(("NameError", "KeyError")), last_line[first_gpu]


def test_a_section_whose_read_section_failed_is_failed_naming_it_and_runs_no_cell(tmp_path, monkeypatch):
    _, runs, failed = run_plan_on_a_cpu([5, 9], tmp_path / "out", monkeypatch)  # section 5 stops at its run cell
    assert failed.get(9) == f"{failed[5]} (section 5, which it reads)", f"section 9 reads section 5's sweep: {failed}"
    assert not [cell_id for cell_id in runs if cell_id.startswith("s9-") and runs[cell_id]["role"] != "prelude"]


def test_a_recording_keeps_every_value_each_cell_bound_and_the_figures_of_the_recorded_sections_only():
    committed = recordings.load_recording(FOLDERS[0])
    sections = recordings.recorded_sections(committed)
    runs = {cell_id: {key: cell[key] for key in ("source", "output", "variables", "role")}
            for cell_id, cell in committed["cells"].items()}  # fmt: skip
    figures = recordings.decode(json.loads(recordings.recording_file(FOLDERS[0]).read_text())["figures"])
    namespace = {
        "ENVIRONMENT": committed["environment"],
        "SECTIONS": {number: {"status": "ok", "reason": "", "headline": f"headline {number}"} for number in sections},
        "FIGURES": [*figures, {"section": 4, "name": "not recorded here", "value": 1.0, "check": "ok"}],
        "pd": pd,
    }
    made = record_cupti.recording_of(namespace, runs, {}, {}, sections, "0" * 40, "2026-12-01T00:00:00+00:00", 1.0)
    for cell_id, cell in committed["cells"].items():
        kept = {name: recordings.decode(value) for name, value in made["cells"][cell_id]["variables"].items()}
        assert sorted(kept) == sorted(cell["variables"]), f"{cell_id}: the recording lost what the cell bound"
        for name in (name for name, value in cell["variables"].items() if isinstance(value, pd.DataFrame)):
            pd.testing.assert_frame_equal(kept[name], cell["variables"][name], obj=f"{cell_id}'s {name}")
    assert recordings.decode(made["figures"]) == figures, "the recorded sections' figures, and only theirs"
    assert {int(n): entry["status"] for n, entry in made["sections"].items()} == dict.fromkeys(sections, "ok")


def test_the_recorder_exits_non_zero_when_a_section_failed_though_it_wrote_the_others(monkeypatch, tmp_path, capsys):
    failed = {8: SECTION_PLAN[8]["run"][0]}
    monkeypatch.setattr(record_cupti, "record", lambda dest, sections: (tmp_path, failed))
    assert record_cupti.main(["--dest", str(tmp_path)]) == 2 and f"cells failed: {failed}" in capsys.readouterr().err
    monkeypatch.setattr(record_cupti, "record", lambda dest, sections: (tmp_path, {}))
    assert record_cupti.main(["--dest", str(tmp_path)]) == 0
