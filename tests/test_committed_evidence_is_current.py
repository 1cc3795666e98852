"""The committed evidence is right: each figure is the one its files give, each run names its GPU, profiler and
commit, and the tables are generated from it (test_python_script_clis: evidence older than the notebook is never
refused, the tables name the cells changed since)."""

from __future__ import annotations

import json
import re

import embed_modules
import pytest
import verified_table
from support import NOTEBOOK, ROOT

from plumbing.harness import headline_figures

RUNS = sorted(path.parent for path in (ROOT / "docs/verified").glob("*/run_info.json"))  # headless runs


def test_the_readme_and_maintainers_tables_are_generated_from_the_committed_evidence():
    assert verified_table.main(["--check"]) == 0, "run: python tools/verified_table.py"


def test_every_verified_run_is_clean_names_its_gpu_and_holds_the_figures_its_own_files_give():
    assert RUNS, "no headless run in docs/verified (run_info.json): keep one (docs/maintainers.md says how)"
    for folder in RUNS:
        summary, run_info = (json.loads((folder / name).read_text()) for name in ("summary.json", "run_info.json"))
        counts = summary["counts"]
        assert counts["FAILED"] == counts["NOT RUN"] == summary["suspect_figures"] == 0, f"{folder}: not a clean run"
        assert run_info["pytest_exit"] == 0 and len(run_info["commit"]) == 40, "run_info.json must name a passing run"
        assert summary["environment"]["gpu"] and summary["environment"]["profiler"] in folder.name, folder.name
        again = headline_figures(folder, summary["environment"]["gpu"])  # from the CSVs nsight wrote in the folder
        assert summary["figures"] and summary["figures"] == again, (
            f"{folder.name}: summary.json's figures are not what the run's own CSVs give: summary.json and the files "
            "must come from the same run (scripts/run_headless, then tools/keep_run.py)"
        )


LISTINGS = sorted((ROOT / "docs" / "verified").glob("*/tu104_metric_suffixes.txt"))  # a launch-mode run's


@pytest.mark.parametrize("listing", LISTINGS, ids=[listing.parent.name for listing in LISTINGS])
def test_every_metric_the_notebook_requests_whose_base_was_queried_exists_for_a_t4(listing):
    """A metric of a base the listing never asked ncu about waits for the next run on the runner, not refused."""
    lines = listing.read_text().splitlines()
    queried = lines[0].split("--metrics ", 1)[1].split("`")[0].split(",")
    known = {line.split()[0] for line in lines if re.match(r"^[a-z0-9]+__", line)}
    strings = re.findall(r"[\"']([a-z0-9]+__[a-z0-9_.]+)[\"']", NOTEBOOK.read_text().replace('\\"', '"'))
    metrics = {"gpu__time_duration.sum", *strings}  # nsight's default metric and every one a cell names
    asked = sorted(metric for metric in metrics if metric.split(".")[0] in queried)
    assert asked, f"no metric of the notebook has a base {listing} lists: read its first line"
    unknown = [metric for metric in asked if metric not in known]
    assert not unknown, f"metrics the notebook requests that a T4's ncu does not know ({listing}): {unknown}"


def test_every_embedding_cell_holds_todays_modules():
    assert embed_modules.stale_cells(json.loads(NOTEBOOK.read_text())) == {}, "run tools/embed_modules.py --fix"
