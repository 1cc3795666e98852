"""Staleness and evidence checks, gathered here: the committed evidence (the recorded page, the tables, the runs, the
recording, the notebook's embedded plumbing) is what the scripts make from today's notebook and files. Several fail
on any edit of the notebook until the evidence is made again; the careless-edit audit leaves out the page re-render."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys

import embed_modules
import pytest
import record_ncu
import recordings
import render_recorded
from fakes import files_of, fresh_clone
from support import NOTEBOOK, ROOT

from plumbing.cells import SECTION_ONE_NAMES

NCU = recordings.recording_folders()
RERECORD = "re-record on the GPU runner (recording/record_ncu.py), run render_recorded.py, commit"
UNITS = {"gpu__time_duration.sum": "ns", "dram__cycles_elapsed.avg.per_second": "hz", "lts__t_sector_hit_rate.pct": "%",
         "gpc__cycles_elapsed.avg.per_second": "hz", "dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte",
         "sm__throughput.avg.pct_of_peak_sustained_elapsed": "%",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed": "%"}  # fmt: skip
on_ncu = pytest.mark.parametrize("folder", NCU, ids=[folder.name for folder in NCU])


def test_a_recording_is_committed():
    assert NCU, f"no Nsight Compute recording in docs/verified: the sections are untested; {RERECORD}"


@on_ncu
def test_the_committed_recorded_page_is_what_render_recorded_makes_today_and_rendering_it_again_changes_no_file(
    folder, tmp_path
):
    repo, where = fresh_clone(tmp_path / "repo"), folder.relative_to(ROOT)  # the page names its recording by its path
    shutil.copytree(folder, repo / where)
    subprocess.run([sys.executable, "tools/render_recorded.py", where], check=True, capture_output=True, cwd=repo)
    before, after = files_of(folder), files_of(repo / where)
    changed = sorted(str(name) for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, (
        f"rendering {where} again rewrote {changed}: if the notebook changed, re-render and commit the page (python "
        f"tools/render_recorded.py {where}); otherwise cell ids, timestamps or timings leak into the page"
    )


def test_the_readme_and_maintainers_tables_are_generated_from_the_committed_evidence():
    done = subprocess.run([sys.executable, "tools/verified_table.py", "--check"], cwd=ROOT, capture_output=True)
    assert done.returncode == 0, f"run: python tools/verified_table.py\n{done.stdout.decode()}{done.stderr.decode()}"


def test_every_verified_run_is_complete_clean_and_names_its_gpu():
    runs = sorted((ROOT / "docs/verified").glob("*/run_info.json"))  # headless runs, not recordings
    assert runs, "no headless run in docs/verified (run_info.json): commit one (docs/maintainers.md says how)"
    for run_info_path in runs:
        folder, run_info = run_info_path.parent, json.loads(run_info_path.read_text())
        summary, (html,) = json.loads((folder / "summary.json").read_text()), folder.glob("*.html")
        assert summary["environment"]["gpu"] in html.read_text(), f"{html} must carry the GPU's name"
        assert folder.name.endswith(f"-{summary['environment']['profiler']}")
        counts = summary["counts"]
        assert counts["FAILED"] == counts["NOT RUN"] == summary["suspect_figures"] == 0, f"{folder}: not a clean run"
        assert run_info["pytest_exit"] == 0 and len(run_info["commit"]) == 40, "run_info.json must name a passing run"


@pytest.mark.parametrize("page", sorted((ROOT / "docs/verified").glob("*/*.html")), ids=lambda page: page.name)
def test_published_pages_show_the_lesson_code_but_not_the_plumbing(page):
    text = re.sub(r"<[^>]+>", "", page.read_text())  # the page as a reader sees it, without markup
    folded = [cell["source"] for cell in recordings.load_cells() if cell["source"].lstrip().startswith("# @title")]
    lines = [line for source in folded for line in source.splitlines()]
    definitions = {line.split("(")[0] for line in lines if re.match(r"(def|class) \w+", line)}
    assert definitions, "today's notebook has no folded cell that defines a function: look for another sign"
    shown = sorted(definition for definition in definitions if definition in text)
    assert not shown, f"{page} shows the folded cells' code ({shown[:5]}): render it with the fold tag kept"
    assert "nsight.annotate(" in text, f"{page} lost the learner's code: only the folded cells' input may be dropped"


def test_every_recorded_section_ends_ok_on_its_recording_with_physical_figures_and_section_1s_names(recorded):
    recorded.section(recorded.sections[-1])  # runs every section; fails, naming a section's cells, unless each is ok
    assert not recorded.value("[f for f in FIGURES if f['check'] == 'SUSPECT']"), "figures outside physical limits"
    present = recorded.value(f"[name for name in {list(SECTION_ONE_NAMES)!r} if name in globals()]")
    assert set(SECTION_ONE_NAMES) - set(present) == {"torch"}, "cpu_section_one_source lacks a name of section 1"


@on_ncu
def test_each_recorded_figure_is_once_in_the_recording_and_is_the_one_its_section_printed(folder):
    recording = recordings.load_recording(folder)
    figures = recordings.decode(recording["figures"])
    names = [(figure["section"], figure["name"]) for figure in figures]
    assert len(names) == len(set(names)), f"{folder.name}: figures recorded twice {sorted(names)}: {RERECORD}"
    for figure in figures:
        printed = "".join(e["output"] for e in recording["cells"].values() if e["section"] == figure["section"])
        assert f"{figure['name']}: {figure['value']:,.1f} {figure['unit']}" in printed, (
            f"{folder.name}: figure {figure['name']} is not what section {figure['section']} printed: {RERECORD}"
        )


def test_recording_was_made_from_the_notebooks_current_benchmark_settings(recorded):
    """Every setting today's define cells bind (not only those the recording holds): one added since is stale too."""
    numbers = recorded.sections
    recorded.section(numbers[-1])  # runs every recorded section's define cells
    settings = sorted(recordings.benchmark_setting_names(recorded.cells, numbers))
    assert settings, "the recorded sections' define cells bind no name: SECTION_PLAN names no define cell"
    stale = recorded.value(f"__import__('recordings').settings_older_than(RECORDING, globals(), {settings!r})")
    assert not stale, f"the define cells changed since the recording {recorded.folder.name}: {stale}: {RERECORD}"


@on_ncu
def test_recorded_units_are_nsight_computes_base_units_and_the_rated_clock_is_one(folder):
    variables = recordings.load_recording(folder)["variables"]
    names = ("bound_frame", "fusion_frame", "sweep_frame")
    frames = [*variables["condition_frames"].values(), *map(variables.get, names)]
    units = {(metric, unit) for frame in frames for metric, unit in zip(frame.Metric, frame.Unit, strict=True)}
    assert not {(m, u) for m, u in units if UNITS.get(m, u) != u}, f"units differ from Nsight Compute's: {units}"
    assert len({clock for frame in frames for clock in frame.ComputeClock}) == 1, "ComputeClock is a rated attribute"


def test_every_metric_the_notebook_requests_exists_for_a_t4():
    listings = sorted((ROOT / "docs" / "verified").glob("*/tu104_metric_suffixes.txt"))
    assert listings, "no committed tu104 metric list (recording/record_ncu.py writes tu104_metric_suffixes.txt)"
    known = {line.split()[0] for line in listings[-1].read_text().splitlines() if re.match(r"^[a-z0-9]+__", line)}
    unknown = [metric for metric in record_ncu.notebook_metrics(recordings.load_cells()) if metric not in known]
    assert not unknown, f"metrics the notebook requests that a T4's ncu does not know ({listings[-1].name}): {unknown}"


@on_ncu
def test_every_cell_the_page_shows_as_it_ran_on_the_gpu_machine_is_the_recorded_one_and_todays_source(folder):
    notebook, recording = render_recorded.build(folder)
    shown = {cell.metadata["recorded_cell"]: cell for cell in notebook.cells if "recorded_cell" in cell.metadata}
    assert shown, "the page shows no recorded cell"
    now = {cell["id"]: cell["source"] for cell in recordings.load_cells()}
    for cell_id, cell in shown.items():
        entry, outputs = recording["cells"][cell_id], "".join(o.get("text", "") for o in cell.outputs)
        assert (cell.source, outputs) == (entry["source"], entry["output"]), f"{cell_id}: not the recorded cell"
        assert hashlib.sha256(cell.source.encode()).hexdigest() == entry["sha256"], (
            f"{cell_id}: not the source that ran"
        )
        assert entry["source"] == now[cell_id], f"{folder.name}: {cell_id} changed since it was recorded: {RERECORD}"


def test_every_embedding_cell_holds_todays_modules():
    assert embed_modules.stale_cells(json.loads(NOTEBOOK.read_text())) == {}, "run tools/embed_modules.py --fix"
