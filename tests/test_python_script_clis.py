"""The Python scripts' command lines: usage, refusals (naming the input and its fix, nothing written), the tables'
columns meaning what their headers say, and the re-recording recipe."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import safe_io
import verified_table
from fakes import fresh_clone
from support import ROOT

# Each Python command and the folder it lives in: the recording wing, the commands, the notebook's tools.
SCRIPTS = {
    "keep_run": "tools",
    "make_wheelhouse": "scripts",
    "notebook_format": "tools",
    "verified_table": "tools",
    "reading_page": "tools",
}


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_command_answers_help_and_refuses_an_unknown_argument_from_a_fresh_clone(script, tmp_path):
    """python3 FOLDER/NAME.py puts only FOLDER on sys.path: a command that imports from a sibling folder (tools/,
    recording/, the plumbing package) must add it itself."""
    command = [sys.executable, f"{SCRIPTS[script]}/{script}.py"]
    bad = {name: " " for name in ("NSPY_TUTORIAL_OUT", "NSPY_TUTORIAL_CUPTI_DIR", "NSPY_TUTORIAL_PROFILER", "NCU_PATH")}
    env = {**os.environ, **bad}  # the notebook's settings, exported and bad: no other tool's --help may mind them
    clone = fresh_clone(tmp_path / "clone")
    done = subprocess.run([*command, "--help"], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: "), (
        f"{command[1]} --help from a fresh clone: add the folder it imports from to sys.path in it\n{done.stderr}"
    )
    unknown = {"notebook_format": ["--check"], "keep_run": ["out"]}.get(script, []) + ["--no-such-option"]
    done = subprocess.run([*command, *unknown], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "--no-such-option" in done.stderr, f"{command[1]}: refuse, naming it: {done}"


@pytest.mark.parametrize(  # the offline recipe runs make_wheelhouse in a plain python3; reading_page needs .ci/venv
    ("script", "ok", "said"),
    [("make_wheelhouse", True, "usage: "), ("reading_page", False, "lacks nbformat: run .ci/venv/bin/python")],
)
def test_a_script_in_a_bare_python3_runs_or_says_what_it_lacks_and_which_python_to_use(script, ok, said):
    path = ROOT / SCRIPTS[script] / f"{script}.py"
    command = [sys.executable, "-S", str(path), *["--help"] * ok]  # -S: no site-packages
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert (done.returncode == 0) == ok and "Traceback" not in done.stderr and said in done.stdout + done.stderr, done


CUPTI_RUN = {
    "environment": {"gpu": "Tesla T4", "driver": "580", "profiler": "cupti", "nsight_python": "1.1.0", "torch": "2.9"},
    "created_utc": "2026-11-30T12:00:00+00:00",
    "counts": {"ok": 6, "SKIPPED": 2, "FAILED": 1, "NOT RUN": 1},
    "figures": [
        {"name": "fp16 matmul", "value": 795.1, "unit": "TFLOP/s", "pct_of_peak": 80.4, "check": "ok"},
        {"name": "fp32 matmul", "value": 0.8, "unit": "TFLOP/s", "pct_of_peak": 0.1, "check": "SUSPECT"},
    ],
    "total_seconds": 24.9,
}
NCU_SUMMARY = {  # a launch-mode run's (recording/run_launch_mode): what its own columns read, the rest left out
    "environment": {"gpu": "NVIDIA L4", "profiler": "ncu", "ncu_mode": "launch: ...", "ncu_version": "2099.1"},
    "created_utc": "2026-12-01T00:00:00+00:00",
    "counts": {"ok": 1, "SKIPPED": 1},
    "figures": [{"name": "scaling", "value": 4289.4, "unit": "GB/s", "pct_of_peak": None, "check": "ok"}],
    "total_seconds": 37.2,
}


def table_repo(tmp_path) -> Path:
    """A fresh clone with the pages tools/verified_table.py writes, and a CUPTI run and a launch-mode run of our own."""
    repo = fresh_clone(tmp_path / "repo")
    (repo / "docs").mkdir()
    for page in ("README.md", "docs/maintainers.md"):
        shutil.copy2(ROOT / page, repo / page)
    today = json.loads((ROOT / "nsight_python_t4_tutorial.ipynb").read_text())
    older = json.loads(json.dumps(today))
    next(cell for cell in older["cells"] if cell.get("id") == "s5-run")["source"] = ["an older s5-run"]
    folders = {
        "t4-cupti": (CUPTI_RUN, {"wall_seconds": 31, "commit": "abcdef0" * 5}, today),
        "l4-ncu-2099.1-launch": (NCU_SUMMARY, {"wall_seconds": 52, "commit": "0123456" * 5}, older),
    }
    for folder, (summary, run_info, executed) in folders.items():
        files = {"summary.json": summary, "run_info.json": run_info, "nsight_python_t4_tutorial.ipynb": executed}
        (repo / "docs" / "verified" / folder).mkdir(parents=True)
        (repo / "docs" / "verified" / folder / "reading_page.ipynb").write_text("")
        for name, content in files.items():
            (repo / "docs" / "verified" / folder / name).write_text(json.dumps(content))
    return repo


def rows_after(page: Path, marker: str) -> list[dict[str, str]]:
    lines = page.read_text().split(marker, 1)[1].split("-->", 1)[1].strip().splitlines()
    table = itertools.takewhile(lambda line: line.startswith("|"), lines)
    cells = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table]
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]


def run_verified_table(repo: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "tools/verified_table.py", *args], capture_output=True, text=True, cwd=repo)


def test_verified_table_puts_each_figure_under_the_header_that_names_it(tmp_path):
    repo = table_repo(tmp_path)
    stale = run_verified_table(repo, "--check")  # the pages' tables are the real evidence's, not these runs'
    assert stale.returncode == 1 and "run tools/verified_table.py" in stale.stdout, stale.stdout + stale.stderr
    done = run_verified_table(repo)
    assert done.returncode == 0, f"a code cell changed since a run must not stop the tables: {done.stderr}"
    rows = {row["GPU"]: row for row in rows_after(repo / "docs/maintainers.md", "verified-table:begin")}
    cupti, ncu = rows["Tesla T4"], rows["NVIDIA L4"]
    assert cupti == {
        "GPU": "Tesla T4",
        "driver": "580",
        "measured with": "CUPTI",
        "nsight-python": "1.1.0",
        "torch": "2.9",
        "date (UTC)": "2026-11-30",
        "sections ok / skipped / failed": "6 / 2 / 2",  # NOT RUN counts as failed
        "total wall time": "25 s in sections, 31 s whole run (commit abcdef0)",
        # SUSPECT beside that one figure alone
        "headline figures (% of datasheet peak)": "fp16 matmul: 795.1 TFLOP/s (80.4%); "
        "fp32 matmul: 0.8 TFLOP/s (0.1%) SUSPECT",
        "evidence": "[docs/verified/t4-cupti/reading_page.ipynb](verified/t4-cupti/reading_page.ipynb)",
        "code cells changed since that run": "since abcdef0: none",
    }
    # the launch-mode row: only the columns whose rule differs from the CUPTI row's
    assert ncu["measured with"] == "Nsight Compute 2099.1 in launch mode", ncu
    assert ncu["headline figures (% of datasheet peak)"] == "scaling: 4,289.4 GB/s (n/a)", "no peak: n/a, never 0%"
    assert ncu["code cells changed since that run"] == "since 0123456: s5-run", "its s5-run differs from today's"
    narrow = sorted(rows_after(repo / "README.md", "evidence-table:begin"), key=lambda row: row["GPU"] != "Tesla T4")
    assert [row["GPU"] for row in narrow] == ["Tesla T4", "NVIDIA L4"] and narrow[0]["measured with"] == "CUPTI"
    assert narrow[0]["sections ok / skipped / failed"] == "6 / 2 / 2", narrow[0]
    assert "SUSPECT" in narrow[0]["headline figures (% of datasheet peak)"], narrow[0]
    assert run_verified_table(repo, "--check").returncode == 0, "the tables it just wrote must pass its own --check"
    summary = repo / "docs" / "verified" / "t4-cupti" / "summary.json"
    summary.write_text(summary.read_text()[:25])  # a copy cut short: named, and the pages left as they were
    pages = {page: (repo / page).read_bytes() for page in ("README.md", "docs/maintainers.md")}
    done = run_verified_table(repo)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{summary} cannot be read" in done.stderr and "tools/keep_run.py" in done.stderr, done.stderr
    summary.unlink()  # a run folder without its summary: refused, never a row dropped in silence
    for mode in ([], ["--check"]):
        done = run_verified_table(repo, *mode)
        assert done.returncode == 2 and "docs/verified/t4-cupti holds no summary.json" in done.stderr, done.stderr
    assert {page: (repo / page).read_bytes() for page in pages} == pages, "a page was rewritten"


END, BEGIN = "<!-- evidence-table:end -->", "<!-- evidence-table:begin"
BROKEN_MARKERS = [  # (page, how the markers were broken, what the refusal says of that page)
    ("docs/maintainers.md", lambda text: text.replace("<!-- verified-table:end -->", ""), "holds 1 of"),
    ("README.md", lambda text: text.replace(END, END * 2), "holds 1 of"),
    ("README.md", lambda text: text.replace(END, "").replace(BEGIN, f"{END}\n{BEGIN}"), f"holds {END!r} before"),
]


@pytest.mark.parametrize(("page", "edit", "said"), BROKEN_MARKERS)
@pytest.mark.parametrize("mode", [[], ["--check"]])
def test_verified_table_refuses_a_page_whose_markers_are_broken_and_writes_nothing(tmp_path, page, edit, said, mode):
    repo = table_repo(tmp_path)
    assert run_verified_table(repo).returncode == 0
    (repo / page).write_text(edit((repo / page).read_text()).replace("| Tesla T4 |", "| edited by hand |"))
    pages = {name: (repo / name).read_bytes() for name in ("README.md", "docs/maintainers.md")}
    done = run_verified_table(repo, *mode)
    assert done.returncode == 2 and "match" not in done.stdout, f"a broken marker must not pass: {done.stdout}"
    assert f"{page} {said}" in done.stderr and "Put the marker lines back" in done.stderr, done.stderr
    assert {name: (repo / name).read_bytes() for name in pages} == pages, "a page was written"


def test_verified_table_writes_both_pages_or_neither_on_a_full_disk(tmp_path, monkeypatch, capsys):
    repo = table_repo(tmp_path)
    pages = {name: (repo / name).read_bytes() for name in ("README.md", "docs/maintainers.md")}
    real_replace = os.replace

    def maintainers_disk_full(source, target):  # after README.md is replaced
        if Path(target).name == "maintainers.md":
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(safe_io.os, "replace", maintainers_disk_full)
    monkeypatch.setattr(verified_table, "ROOT", repo)
    assert verified_table.main([]) == 2
    assert {name: (repo / name).read_bytes() for name in pages} == pages, "one page written, the other not"
    assert "No space left on device" in capsys.readouterr().err


def test_notebook_format_fix_line_runs_as_pasted_whatever_the_notebooks_name(tmp_path):
    notebook = json.loads((ROOT / "nsight_python_t4_tutorial.ipynb").read_text())
    notebook["cells"][0]["metadata"] = {"collapsed": True}
    (edited := tmp_path / "my notes; touch pwned.ipynb").write_text(json.dumps(notebook))
    check = [sys.executable, str(ROOT / "tools/notebook_format.py"), "--check", str(edited)]
    advice = subprocess.run(check, capture_output=True, text=True, cwd=tmp_path).stdout.strip().splitlines()[-1]
    pasted = advice.removeprefix("Fix with: ").replace("python ", f"{sys.executable} ", 1)
    done = subprocess.run(["bash", "-c", pasted], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and not (tmp_path / "pwned").exists(), f"the pasted line ran more than --fix: {advice}"
    assert subprocess.run(check, capture_output=True, cwd=tmp_path).returncode == 0, "the pasted line did not fix it"
