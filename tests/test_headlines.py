"""The headline functions of plumbing/figures.py, imported: on the tables that real recorded runs gave, each
section's headline function gives back the figure and the headline that run recorded.

Sections 4 and 7 come from the Nsight Compute recording (docs/verified/<gpu>-ncu-<version>/: its figures.json holds
what the notebook's -record cells printed there); section 8 from the CUPTI recording (cupti_recording.json, with
the output of every cell it ran). The section's own cells build its table in a real kernel, as in
tests/test_ncu_recordings.py and tests/test_cupti_recordings.py; the function then runs here, on that table.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import recordings
from kernel_session import KernelSession
from support import RecordedNotebook, cell_by_id

from plumbing.figures import doubling_headline, fusion_headline, thermal_headline

NCU_FOLDERS = [folder for folder in recordings.recording_folders("ncu") if (folder / "figures.json").exists()]
CUPTI_FOLDERS = recordings.recording_folders("cupti")


def _recorded(figures: dict, number: int) -> tuple[float, str]:
    """(the figure value, the headline) a recorded run kept for section `number`."""
    (figure,) = [figure for figure in figures["figures"] if figure["section"] == number]
    return figure["value"], figures["sections"][str(number)]["headline"]


@pytest.fixture(scope="module", params=NCU_FOLDERS, ids=[folder.name for folder in NCU_FOLDERS])
def ncu_run(request, notebook, tmp_path_factory):
    runner = RecordedNotebook(notebook, request.param, tmp_path_factory.mktemp(f"headlines-{request.param.name}"))
    yield runner, json.loads((request.param / "figures.json").read_text())
    runner.session.close()


def test_an_ncu_recording_with_figures_is_committed():
    assert NCU_FOLDERS, "no docs/verified/*/figures.json: render one with python scripts/render_recorded.py"


def test_section_4_headline_and_figure_match_what_the_recording_printed(ncu_run):
    runner, figures = ncu_run
    runner.section(4)
    clock_table = pd.DataFrame(runner.value("clock_table.to_dict('records')"))
    large_gbs, headline = doubling_headline(clock_table)
    value, recorded_headline = _recorded(figures, 4)
    assert headline == recorded_headline, "doubling_headline no longer gives section 4's recorded headline"
    assert large_gbs == pytest.approx(value, abs=0.01), "doubling_headline's GB/s is not the recorded figure"


def test_section_7_headline_and_figure_match_what_the_recording_printed(ncu_run):
    runner, figures = ncu_run
    runner.section(7)
    fusion_table = pd.DataFrame(runner.value("fusion_table.reset_index().to_dict('records')")).set_index("Annotation")
    fused_gbs, headline = fusion_headline(fusion_table)
    value, recorded_headline = _recorded(figures, 7)
    assert headline == recorded_headline, "fusion_headline no longer gives section 7's recorded headline"
    assert fused_gbs == pytest.approx(value, abs=0.01), "fusion_headline's GB/s is not the recorded figure"


@pytest.mark.parametrize("folder", CUPTI_FOLDERS, ids=[folder.name for folder in CUPTI_FOLDERS])
def test_section_8_headline_and_figure_match_what_the_cupti_recording_printed(notebook, folder, tmp_path):
    recording = recordings.load_recording(folder)
    session = KernelSession(env={"NSPY_TUTORIAL_OUT": str(tmp_path / "out"), "MPLBACKEND": "Agg"}, cwd=tmp_path)
    try:
        session.run(cell_by_id(notebook, "harness").source)
        session.run(recordings.cpu_section_one_source(folder))
        for _, role, source in recordings.cpu_section_sources(recordings.load_cells(), 8):
            if role != "analysis":
                session.run(source)
        session.run(cell_by_id(notebook, "s8-table").source)  # the section's own rule for a pause
        pauses = session.value("{mode: int(paused_before(r['runs']).sum()) for mode, r in thermal.items()}")
    finally:
        session.close()
    fp16_tflops, headline = thermal_headline(recording["cells"]["s8-run"]["variables"]["thermal"], pauses)
    printed = recording["cells"]["s8-record"]["output"].strip().splitlines()
    assert f"-> {headline}" == printed[-1], (
        f"thermal_headline no longer gives section 8's recorded headline {printed[-1]!r}: fix it, or re-record "
        "(python3 scripts/record_cupti.py on the GPU runner) if the headline changed on purpose"
    )
    (figure,) = [figure for figure in recordings.decode(recording["figures"]) if figure["section"] == 8]
    assert fp16_tflops == pytest.approx(figure["value"], abs=0.001), "thermal_headline's TFLOP/s is not the figure"
