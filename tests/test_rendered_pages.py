"""The pages a reader opens: the reading pages README links (.ipynb, which GitHub renders) and their HTML, for the
CUPTI run (render_recorded.py --executed) and for a recording; and what render_recorded.py refuses to render."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import nbformat
import pytest
import recordings
import render_recorded
from fakes import files_of
from support import NOTEBOOK, ROOT

from plumbing.cells import section_of

RUNS = sorted(path.parent for path in (ROOT / "docs" / "verified").glob("*-cupti/nsight_python_t4_tutorial.ipynb"))
on_recordings = pytest.mark.parametrize("folder", recordings.recording_folders(), ids=lambda folder: folder.name)


def test_a_real_cupti_run_is_committed():
    assert RUNS, "no docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb: run scripts/run_headless on a GPU machine"


@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_every_plot_of_a_cupti_runs_page_has_alt_text_from_its_title(run, tmp_path):
    copy = tmp_path / "nsight_python_t4_tutorial.ipynb"
    shutil.copy(run / copy.name, copy)
    render_recorded.cupti_page(copy)
    images = re.findall(r'<img([^>]*)src="data:image/png', copy.with_suffix(".html").read_text())
    pictures = sum(
        "image/png" in output.get("data", {})
        for cell in nbformat.read(copy, as_version=4).cells
        for output in cell.get("outputs", [])
    )
    assert len(images) == pictures, f"the page shows {len(images)} of the run's {pictures} plots"
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
    assert all(fact in text for fact in facts), f"the page must say {facts}: python tools/render_recorded.py"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["created_utc"] == recording["created_utc"], "the page was rendered from another recording"
    assert summary["figures"] == recordings.decode(recording["figures"]), "figures differ from the GPU run's"
    assert summary["figures"] and all(figure["check"] == "ok" for figure in summary["figures"]), summary["figures"]
    by_number = {info["number"]: info for info in summary["sections"]}
    for number, info in recording["sections"].items():
        page = by_number[int(number)]
        assert (page["status"], page["headline"]) == ("ok", info["headline"]), f"section {number}"
        assert page["seconds"] == info["cost"]["wall_s"], f"section {number}'s time must be the GPU machine's"


# ---------------------------------------------------------------- the reading pages README links
def readme_links() -> list[str]:
    table = (ROOT / "README.md").read_text().split("evidence-table:begin", 1)[1].split("evidence-table:end", 1)[0]
    return re.findall(r"\]\(([^)]+)\)", table)


def code_home_exists(home: str) -> bool:
    """A reading cell's "its code:" names files of the clone, or a cell of the tutorial notebook by its id."""
    if home.startswith(f"{NOTEBOOK.name}, cell "):
        return home.removeprefix(f"{NOTEBOOK.name}, cell ") in {cell["id"] for cell in recordings.load_cells()}
    return all((ROOT / path.split(" (")[0]).is_file() for path in home.split(", "))


def test_readme_links_a_reading_page_of_each_run_that_shows_each_folded_cell_as_colab_does():
    links = readme_links()
    assert len(links) == len(list((ROOT / "docs/verified").glob("*/summary.json"))), f"one link per run: {links}"
    assert all(link.endswith(".ipynb") and (ROOT / link).is_file() for link in links), (
        f"README must link .ipynb pages that exist (GitHub renders them; .html shows as raw text): {links}; run "
        "tools/render_recorded.py, then tools/verified_table.py"
    )
    for link in links:
        cells = nbformat.read(ROOT / link, as_version=4).cells
        folded = [cell for cell in cells if cell.cell_type == "code" and cell.source.startswith("# @title")]
        assert folded, f"{link}: no folded cell at all? the harness cell is one"
        for cell in folded:
            title, home = (cell.source.split("\n") + [""])[:2]
            shown = f"{link}: a folded cell must show only its title and where its code lives:\n{cell.source[:300]}"
            assert cell.source.count("\n") == 1 and home.startswith("# Folded, as Colab shows it; its code: "), shown
            assert code_home_exists(home.split("its code: ", 1)[1]), f"{link}: {home} names no file or cell"
            assert cell.metadata.get("cellView") == "form", f"{link}: {title} must keep Colab's form view"


@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_a_cupti_runs_reading_page_is_its_executed_notebook_with_folded_code_left_out_and_the_run_kept_whole(
    run, tmp_path
):
    for name in ("nsight_python_t4_tutorial.ipynb", "summary.json"):
        shutil.copy(run / name, tmp_path / name)
    executed = (tmp_path / "nsight_python_t4_tutorial.ipynb").read_bytes()
    page = render_recorded.cupti_page(tmp_path / "nsight_python_t4_tutorial.ipynb")
    assert (tmp_path / "nsight_python_t4_tutorial.ipynb").read_bytes() == executed, "the run's evidence was written"
    written = {name: (tmp_path / name).read_bytes() for name in (page.name, "nsight_python_t4_tutorial.html")}
    assert written == {name: (run / name).read_bytes() for name in written}, (
        f"{run.name}'s committed pages are not what render_recorded.py --executed makes of its executed notebook: "
        f"run it on {run.relative_to(ROOT)}/nsight_python_t4_tutorial.ipynb and commit the pages"
    )
    whole, reading = (nbformat.reads(text, as_version=4).cells for text in (executed, written[page.name]))
    assert [cell.get("outputs") for cell in reading] == [cell.get("outputs") for cell in whole], "outputs differ"
    differ = [cell.id for cell, same in zip(reading, whole, strict=True) if cell.source != same.source]
    assert differ == [c.id for c in whole if c.cell_type == "code" and c.source.startswith("# @title")], differ


@on_recordings
def test_a_recorded_reading_page_shows_the_lesson_code_the_recorded_cells_and_every_folded_cell_by_its_title(folder):
    notebook, _ = render_recorded.build(folder)  # the page before it runs: which cells it has, and their code
    lesson = {cell["source"] for cell in recordings.load_cells() if cell["type"] == "code"}
    kinds = {}
    for cell in render_recorded.reading_page(notebook).cells:
        if cell.cell_type != "code":
            continue
        lines = cell.source.split("\n")
        folded = cell.source.startswith("# @title") and len(lines) == 2 and "its code: " in lines[1]
        kind = "recorded" if "recorded_cell" in cell.metadata else "lesson" if cell.source in lesson else "folded"
        shows = f"{folder.name}: a cell shows code neither the lesson's, nor recorded, nor a folded cell's title"
        assert kind != "folded" or folded, f"{shows}:\n{cell.source[:400]}"
        kinds.setdefault(kind, []).append(cell.source)
    assert len(kinds) == 3 and "nsight.annotate(" in "".join(kinds["lesson"]), f"{folder.name}: {sorted(kinds)}"
    twice = sorted({source[:60] for source in kinds["lesson"] if kinds["lesson"].count(source) > 1})
    assert not twice, f"{folder.name}: lesson cells shown twice (a cell the page only runs was left on it): {twice}"
    homes = "\n".join(kinds["folded"])
    assert "its code: recording/recordings.py" in homes, "a cell the page adds must say which script made it"


@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_a_cupti_reading_page_names_the_modules_each_folded_cell_embeds(run):
    page = render_recorded.reading_page(nbformat.read(run / "nsight_python_t4_tutorial.ipynb", as_version=4))
    harness = next(cell for cell in page.cells if cell.get("id") == "harness")
    assert harness.source.endswith("its code: plumbing/sections.py, plumbing/harness.py"), (
        f"the harness cell must say where its code lives:\n{harness.source}"
    )


# ---------------------------------------------------------------- inputs render_recorded.py refuses, writing nothing
def render(*args) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "tools/render_recorded.py"), *map(str, args)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


def refused(done: subprocess.CompletedProcess, *said: str) -> str:
    assert done.returncode != 0 and "Traceback" not in done.stderr, f"must refuse, plainly:\n{done.stderr[-2000:]}"
    assert all(words in done.stderr for words in said), f"the refusal must say {said}:\n{done.stderr}"
    return done.stderr


def a_recording(tmp_path: Path, name: str = "recording", change=lambda recording: None) -> Path:
    (folder := tmp_path / name).mkdir()
    recording = json.loads((recordings.recording_folders()[0] / recordings.RECORDING_FILE).read_text())
    change(recording)
    (folder / recordings.RECORDING_FILE).write_text(json.dumps(recording))
    return folder


def test_a_folder_name_holding_a_newline_is_refused_and_never_runs_as_code(tmp_path):
    folder = a_recording(tmp_path, "rec\nopen('RAN_AS_CODE', 'w').close()")
    before = files_of(tmp_path)
    refused(render(folder), "control character", "rename the folder")
    assert files_of(tmp_path) == before and not (ROOT / "RAN_AS_CODE").exists(), "something was written"
    title = recordings.cpu_section_one_source("x\nraise SystemExit('ran')").split("\n", 1)[0]
    assert title.startswith("# @title") and "\\n" in title, f"a name in a title must stay inside it: {title}"


def test_a_recording_with_no_sections_is_refused_not_rendered_as_every_section_not_run(tmp_path):
    folder = a_recording(tmp_path, change=lambda recording: recording.update(sections={}))
    before = files_of(tmp_path)
    refused(render(folder), "records no section", "recording/record_ncu.py")
    assert files_of(tmp_path) == before, "nothing may be written for a recording without sections"


@pytest.mark.parametrize("older", ["a setting changed since", "a setting added since"])
def test_a_recording_older_than_the_notebooks_settings_is_refused_and_no_page_is_written(tmp_path, older):
    recording = json.loads((recordings.recording_folders()[0] / recordings.RECORDING_FILE).read_text())
    today = recordings.benchmark_setting_names(recordings.load_cells())  # a setting of today's define cells
    name = sorted(set(recording["define_values"]) & today)[0]

    def change(recording):
        if older == "a setting added since":
            del recording["define_values"][name]
        else:
            recording["define_values"][name] = recordings.encode([1, 2, 3])

    folder = a_recording(tmp_path, change=change)
    before = files_of(tmp_path)
    said = refused(render(folder), "older than the notebook", f"'{name}'", "re-record")
    assert "\x1b[" not in said, f"a refusal is read in a terminal or a log, without colour codes: {said!r}"
    assert files_of(tmp_path) == before, "no page may show today's settings beside the recording's figures"


def executed_copy(tmp_path: Path, name: str) -> Path:
    shutil.copy(RUNS[-1] / "nsight_python_t4_tutorial.ipynb", tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize("name", ["run.html", render_recorded.RUN_PAGE])
def test_executed_is_never_overwritten_by_its_own_page(tmp_path, name):
    given = executed_copy(tmp_path, name)  # a notebook under the page's name: the HTML's, or the reading page's
    before = files_of(tmp_path)
    refused(render("--executed", given), f"--executed {given}")
    assert files_of(tmp_path) == before, "the input was overwritten or a page written"


def test_executed_refuses_a_notebook_that_never_ran(tmp_path):
    shutil.copy(NOTEBOOK, tmp_path / NOTEBOOK.name)
    before = files_of(tmp_path)
    refused(render("--executed", tmp_path / NOTEBOOK.name), "no code cell of it ran", "scripts/run_headless")
    assert files_of(tmp_path) == before, "a page without outputs was written"


def test_a_page_set_is_written_all_or_none(tmp_path):
    given = executed_copy(tmp_path, "nsight_python_t4_tutorial.ipynb")
    given.with_suffix(".html").mkdir()  # the HTML page cannot be written there: the reading page must not be either
    before = files_of(tmp_path)
    refused(render("--executed", given), "nothing was written")
    assert files_of(tmp_path) == before and not (tmp_path / render_recorded.RUN_PAGE).exists(), "half a page set"
