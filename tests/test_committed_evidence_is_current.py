"""Staleness checks: the committed evidence is what the scripts make from today's notebook and files. These fail on
any edit of the notebook (or of what the pages are made from) until the evidence is made again and committed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from support import ROOT

RECORDINGS = sorted(path.parent for path in (ROOT / "docs/verified").glob("*/recording.json"))


@pytest.mark.skipif(not RECORDINGS, reason="no docs/verified/*/recording.json to render")
def test_the_committed_recorded_page_is_what_render_recorded_makes_today_and_rendering_it_again_changes_no_file(
    tmp_path,
):
    """One render in a copy of the repository: every committed file comes out byte for byte."""
    committed = RECORDINGS[0]
    repo = tmp_path / "repo"  # the page names its recording by its path in the repository: keep that path
    for part in ("scripts", "plumbing", committed.relative_to(ROOT)):
        shutil.copytree(ROOT / part, repo / part)
    for name in ("nsight_python_t4_tutorial.ipynb", "requirements.txt"):
        shutil.copy(ROOT / name, repo / name)
    folder = repo / committed.relative_to(ROOT)
    again = subprocess.run([sys.executable, "scripts/render_recorded.py", str(folder)], check=True,
                           capture_output=True, text=True, cwd=repo)  # fmt: skip
    before, after = (
        {p.relative_to(top): p.read_bytes() for p in top.rglob("*") if p.is_file()} for top in (committed, folder)
    )
    changed = sorted(str(name) for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, (
        f"rendering {committed.relative_to(ROOT)} again rewrote {changed}: if the notebook changed, re-render and "
        f"commit the page (python scripts/render_recorded.py {committed.relative_to(ROOT)}); otherwise cell ids, "
        "timestamps or timings leak into the page"
    )
    assert "unchanged" in again.stdout, again.stdout


def test_the_readme_and_maintainers_tables_are_generated_from_the_committed_evidence():
    done = subprocess.run([sys.executable, "scripts/verified_table.py", "--check"], cwd=ROOT, capture_output=True)
    assert done.returncode == 0, f"run: python scripts/verified_table.py\n{done.stdout.decode()}{done.stderr.decode()}"


def test_every_verified_run_is_complete_clean_and_names_its_gpu():
    for run_info_path in sorted((ROOT / "docs/verified").glob("*/run_info.json")):  # headless runs, not recordings
        folder = run_info_path.parent
        summary = json.loads((folder / "summary.json").read_text())
        (html,) = folder.glob("*.html")
        assert summary["environment"]["gpu"] in html.read_text(), f"{html} must carry the GPU's name"
        assert folder.name.endswith(f"-{summary['environment']['profiler']}")
        counts = summary["counts"]
        assert counts["FAILED"] == counts["NOT RUN"] == summary["suspect_figures"] == 0, f"{folder}: not a clean run"
        run_info = json.loads((folder / "run_info.json").read_text())
        assert run_info["pytest_exit"] == 0 and len(run_info["commit"]) == 40, "run_info.json must name a passing run"


@pytest.mark.parametrize(
    "page",
    ["docs/verified/nvidia-h200-cupti/nsight_python_t4_tutorial.html",
     "docs/verified/nvidia-h200-ncu-2025.3.1/recorded_sections.html"],
)  # fmt: skip
def test_published_pages_show_the_lesson_code_but_not_the_plumbing(page):
    text = re.sub(r"<[^>]+>", "", (ROOT / page).read_text())  # the page as a reader sees it, without markup
    assert "class SectionGuard" not in text and "def record_figure" not in text, f"{page} shows the folded code"
    assert "nsight.annotate(" in text, f"{page} lost the learner's code: only the folded cells' input may be dropped"
