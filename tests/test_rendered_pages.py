"""The HTML pages a reader opens: the committed CUPTI run's page (render_recorded.py --executed) and the recorded
page's summary."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
import recordings
import render_recorded
import verified_table
from support import ROOT

RUNS = sorted(path.parent for path in (ROOT / "docs" / "verified").glob("*-cupti/nsight_python_t4_tutorial.ipynb"))
PLACEHOLDER = "No description has been provided for this image"


@pytest.fixture(scope="module", params=RUNS, ids=[run.name for run in RUNS])
def page(request, tmp_path_factory):
    copy = tmp_path_factory.mktemp(request.param.name) / "nsight_python_t4_tutorial.ipynb"
    shutil.copy(request.param / copy.name, copy)
    shutil.copy(request.param / "summary.json", copy.parent / "summary.json")
    executed = nbformat.read(copy, as_version=4)
    summary = json.loads((copy.parent / "summary.json").read_text())
    return executed, summary, render_recorded.cupti_page(copy).read_text()


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_real_cupti_run_is_committed():
    assert RUNS, "no docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb: run scripts/run_headless on a GPU machine"


def test_skipped_sections_are_a_heading_and_one_line_to_the_recorded_page(page):
    executed, summary, rendered = page
    skipped = sorted(render_recorded.skipped_sections(summary))
    assert skipped, "the committed CUPTI run skipped no section: is it a CUPTI-mode run?"
    recorded = recordings.recording_folders()[-1].name
    links = re.findall(r'href="([^"]*recorded_sections\.html)"', rendered)
    assert links == [f"../{recorded}/recorded_sections.html"] * len(skipped), links
    for number in skipped:
        dropped = [cell.id for cell in executed.cells if cell.id.startswith(f"s{number}-")]
        leaked = [cell_id for cell_id in dropped if f'id="cell-id={cell_id}"' in rendered]
        assert not leaked, f"section {number} was SKIPPED, yet its cells {leaked} are on the page"
    assert _text(rendered).count("Skipped in this run") == len(skipped)


def test_the_cupti_fallback_reason_is_printed_once(page):
    executed, summary, rendered = page
    reason = render_recorded.cupti_reason(summary)
    assert reason, "summary.json of the committed CUPTI run names no CUPTI reason"
    printed = [output.get("text", "") for cell in executed.cells if cell.cell_type == "code" for output in cell.outputs]
    assert sum(text.count(reason) for text in printed) > 1, "the run printed the reason once: this proves nothing"
    assert _text(rendered).count(reason) == 1, f"the reason should appear once on the page: {reason!r}"


def test_a_run_without_summary_json_gets_a_message_and_no_page(tmp_path):
    (run,) = RUNS[-1:]
    executed = tmp_path / "nsight_python_t4_tutorial.ipynb"
    shutil.copy(run / executed.name, executed)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/render_recorded.py"), "--executed", str(executed)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "no readable summary.json beside it" in done.stderr and "scripts/run_headless" in done.stderr, done.stderr
    assert not (tmp_path / "nsight_python_t4_tutorial.html").exists(), "a page was written without the run's status"


def test_every_plot_has_alt_text_from_its_title(page):
    _, _, rendered = page
    images = re.findall(r'<img([^>]*)src="data:image/png', rendered)
    assert images, "the page has no plots"
    alts = [re.search(r'alt="([^"]*)"', attributes) for attributes in images]
    missing = [index for index, alt in enumerate(alts) if not alt or alt.group(1) in ("", PLACEHOLDER)]
    assert not missing, f"plots {missing} (in page order) have no alt text"
    assert all(html.unescape(alt.group(1)).startswith("Plot. title: ") for alt in alts), [a.group(1) for a in alts]


@pytest.mark.parametrize("folder", recordings.recording_folders(), ids=lambda folder: folder.name)
def test_section_4s_note_names_the_recording_of_each_calls_rows_once_and_only_where_calls_were_served(folder):
    """Section 4 mixes rows of two recordings (base clocks are never run on the runner)."""
    recording = recordings.load_recording(folder)
    note = render_recorded.served_note(recording, 4)
    rows = {tuple(cell.strip(" `") for cell in line.split("|")[1:3]): line for line in note.splitlines()[4:]}
    for call in (call for call in recording["calls"] if call.get("section") == 4):
        line = rows.get((call["cache_control"], call["clock_control"]))
        assert line, f"no row for cache_control={call['cache_control']}, clock_control={call['clock_control']}: {note}"
        source = (
            call["served_from"]["label"] if call.get("served_from") else f"this recording ({recording['created_utc']})"
        )
        assert source in line, f"the rows of {call['cache_control']}/{call['clock_control']} come from {source}: {line}"

    served = {call["section"] for call in recording["calls"] if call.get("served_from")}
    notebook, _ = render_recorded.build(folder)
    tables = [cell for cell in notebook.cells if "| cache_control | clock_control | rows from |" in cell.source]
    assert len(tables) == len(served), (
        f"the page shows the rows-by-recording table {len(tables)} times; only the sections with calls served from "
        f"another recording ({sorted(served)}) have one: served_note(recording, number) is per section"
    )


def test_a_recorded_page_needs_every_section_ok_and_a_run_page_collapses_only_the_skipped_ones():
    statuses = {"2": "ok", "3": "NOT RUN", "4": "FAILED", "5": "SKIPPED", "6": "ok"}
    sections = {number: {"number": int(number), "status": status, "reason": ""} for number, status in statuses.items()}
    refused = render_recorded.sections_not_ok(sections)
    assert sorted(refused) == ["3", "4", "5"], f"a NOT RUN, FAILED or SKIPPED section is no page: {refused}"
    collapsed = render_recorded.skipped_sections({"sections": list(sections.values())})
    assert collapsed == {5}, f"a failed section keeps its cells and error on the run's page: {collapsed}"


@pytest.mark.parametrize("folder", recordings.recording_folders(), ids=lambda folder: folder.name)
def test_the_recorded_pages_summary_json_says_what_the_gpu_run_said_section_by_section(folder):
    """The page runs the notebook's summary cell on the recording."""
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


def test_a_recordings_table_row_reads_its_summary_and_the_recordings_ncu_cost(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_table, "ROOT", tmp_path)
    folder = tmp_path / "docs" / "verified" / "gpu-ncu-2025.3.1"
    folder.mkdir(parents=True)
    figure = {"name": "fp16 product", "value": 752.3, "unit": "TFLOP/s", "pct_of_peak": 76.1, "check": "ok"}
    summary = {"environment": {"gpu": "G", "profiler": "ncu (launch mode)", "ncu_version": "2025.3.1"},
               "created_utc": "2026-12-01T23:58:20+00:00", "counts": {"ok": 8, "SKIPPED": 1, "FAILED": 1, "NOT RUN": 0},
               "figures": [figure], "total_seconds": 190.2}  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    cost = {"ncu_processes": 2, "ncu_wall_s": 10.4}
    sections = {"2": {"cost": cost, "notebook_commit": "0c0cdae6"}, "9": {"cost": {"ncu_processes": 1,
                "ncu_wall_s": None}, "notebook_commit": "1234567a"}}  # fmt: skip
    (folder / "recording.json").write_text(json.dumps({"sections": sections}))
    (folder / "recorded_sections.html").write_text("<html></html>")
    header = verified_table.HEADER.splitlines()[0].strip("| ").split(" | ")
    cells = dict(zip(header, verified_table.row_cells(folder / "summary.json"), strict=True))
    assert cells["profiler"] == "ncu 2025.3.1 (launch mode)" and cells["date (UTC)"] == "2026-12-01"
    assert cells["sections ok / skipped / failed"] == "8 / 1 / 1"
    assert (
        cells["total wall time"]
        == "190 s in sections, 3 ncu processes, 10 s of timed ncu wall time (commit 0c0cdae, 1234567)"
    )
    assert cells["headline figures (% of datasheet peak)"] == "fp16 product: 752.3 TFLOP/s (76.1%)"
    page = "docs/verified/gpu-ncu-2025.3.1/recorded_sections.html"
    assert cells["run"] == f"[{page}]({page})", "a recording's row links its page"
