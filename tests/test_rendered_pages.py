"""The HTML pages a reader opens: the CUPTI run's page (render_recorded.py --executed) and the recorded page."""

from __future__ import annotations

import html
import json
import re
import shutil
from itertools import pairwise

import pytest
import recordings
import render_recorded
from support import ROOT

from plumbing.cells import section_of

RUNS = sorted(path.parent for path in (ROOT / "docs" / "verified").glob("*-cupti/nsight_python_t4_tutorial.ipynb"))
on_recordings = pytest.mark.parametrize("folder", recordings.recording_folders(), ids=lambda folder: folder.name)


def test_a_real_cupti_run_is_committed():
    assert RUNS, "no docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb: run scripts/run_headless on a GPU machine"


@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_every_plot_of_a_cupti_runs_page_has_alt_text_from_its_title(run, tmp_path):
    copy = tmp_path / "nsight_python_t4_tutorial.ipynb"
    shutil.copy(run / copy.name, copy)
    images = re.findall(r'<img([^>]*)src="data:image/png', render_recorded.cupti_page(copy).read_text())
    assert images, "the page has no plots"
    alts = [html.unescape(found.group(1)) if (found := re.search(r'alt="([^"]*)"', a)) else "" for a in images]
    assert all(alt.startswith("Plot. title: ") for alt in alts), f"plots need alt text from their titles: {alts}"


def test_alt_text_gives_the_title_first_then_each_axis_by_its_own_label():
    source = 'ax.set(ylabel="TFLOP/s", xlabel=f"n ({unit})")\nfig.suptitle("fp16 vs fp32")\nax.set_xlabel("bytes")'
    alt = "Plot. title: fp16 vs fp32; y axis: TFLOP/s; x axis: n ({...}); x axis: bytes"
    assert render_recorded.alt_text(source) == alt, "a plot's alt text must name each axis by its own label"


@on_recordings
def test_the_recorded_page_says_where_the_runners_ncu_left_clocks_a_call_asked_for_alone_and_only_there(folder):
    notebook, recording = render_recorded.build(folder)
    forced = {c["section"] for c in recording["calls"] if c["clock_control"] != c.get("ncu_clock_control", "none")}
    noted = [after for note, after in pairwise(notebook.cells) if "--clock-control none`" in note.source]
    noted = [cell for cell in noted if "recorded_cell" in cell.metadata]  # not the page's own label
    notes = {section_of(cell.metadata["recorded_cell"]) for cell in noted}  # a run cell's note precedes the cell
    assert 4 in forced and notes == forced, f"calls ncu ran at other clocks in {sorted(forced)}, notes in {notes}"


def test_a_recorded_page_is_refused_for_a_section_not_run_failed_or_skipped():
    statuses = {"2": "ok", "3": "NOT RUN", "4": "FAILED", "5": "SKIPPED", "6": "ok"}
    refused = render_recorded.sections_not_ok({number: {"status": status} for number, status in statuses.items()})
    assert sorted(refused) == ["3", "4", "5"], f"only ok sections make a recorded page: {refused}"


@on_recordings
def test_the_recorded_pages_summary_json_says_what_the_gpu_run_said_section_by_section(folder):
    recording, text = recordings.load_recording(folder), (folder / "recorded_sections.html").read_text()
    facts = (recording["provenance"]["gpu"], recording["provenance"]["ncu_version"], "launch mode", "not attach")
    assert all(fact in text for fact in facts), f"the page must say {facts}: python scripts/render_recorded.py"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["created_utc"] == recording["created_utc"], "the page was rendered from another recording"
    assert summary["figures"] == recordings.decode(recording["figures"]), "figures differ from the GPU run's"
    assert summary["figures"] and all(figure["check"] == "ok" for figure in summary["figures"]), summary["figures"]
    by_number = {info["number"]: info for info in summary["sections"]}
    for number, info in recording["sections"].items():
        page = by_number[int(number)]
        assert (page["status"], page["headline"]) == ("ok", info["headline"]), f"section {number}"
        assert page["seconds"] == info["cost"]["wall_s"], f"section {number}'s time must be the GPU machine's"
