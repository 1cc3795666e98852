"""Every Python script in scripts/ answers --help with its usage (exit 0) and refuses an unknown argument (exit 2)
before it does anything; the library modules say they are not scripts; a broken file a script reads is named with
how to write it again, not a traceback (issue 25)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import page_size
import pytest
import render_recorded
from support import ROOT

SCRIPTS = ("record_cupti", "record_ncu", "make_wheelhouse", "notebook_format", "page_size", "verified_table",
           "render_recorded")  # fmt: skip
MODULES = {"recordings": "scripts/record_ncu.py", "ncu_launch": "scripts/record_ncu.py"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_script_answers_help_with_its_usage_and_refuses_an_unknown_argument(script, capsys):
    main = __import__(script).main  # parse_args stops both before anything is read or written
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0 and capsys.readouterr().out.startswith("usage: "), (
        f"scripts/{script}.py --help must print its usage and exit 0 (use argparse in its main)"
    )
    with pytest.raises(SystemExit) as stopped:
        main(["--check", "--no-such-option"] if script == "notebook_format" else ["--no-such-option"])
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and "unrecognized arguments: --no-such-option" in said, (
        f"scripts/{script}.py must refuse an unknown argument with exit 2 before it does anything: {said}"
    )


@pytest.mark.parametrize("module", MODULES)
def test_a_library_module_run_as_a_script_says_it_is_one_and_which_script_to_run(module, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{module}.py")], capture_output=True, text=True,
                          cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "is a module" in done.stderr and MODULES[module] in done.stderr, (
        f"scripts/{module}.py run by itself must say it is a module and name the script to run (exit 2): {done}"
    )
    helped = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{module}.py"), "--help"], capture_output=True,
                            text=True, cwd=tmp_path)  # fmt: skip
    assert helped.returncode == 0 and helped.stdout.startswith("usage: "), helped


def test_page_size_names_a_file_that_is_no_notebook(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a notebook")
    assert page_size.main([str(tmp_path / "notes.txt")]) == 2
    said = capsys.readouterr().err
    assert f"NOTEBOOK {tmp_path / 'notes.txt'} cannot be read as a notebook" in said and ".ipynb" in said, said


@pytest.mark.parametrize("kind", ["no such folder", "a folder without a recording", "a cut-short recording.json"])
def test_render_recorded_names_a_folder_or_recording_it_cannot_read_and_how_to_make_it_again(kind, tmp_path, capsys):
    folder = tmp_path / "recording"
    if kind != "no such folder":
        folder.mkdir()
    if kind == "a cut-short recording.json":
        (folder / "recording.json").write_text('{"format": 2, "cells": {"a-cell": {"sou')
    assert render_recorded.main([str(folder)]) == 2, f"render_recorded.py on {kind} must exit 2"
    said = capsys.readouterr().err
    expected = {
        "no such folder": f"{folder} is not a folder",
        "a folder without a recording": f"{folder} holds no recording.json",
        "a cut-short recording.json": f"{folder / 'recording.json'} cannot be read as a recording",
    }[kind]
    assert expected in said and "record_ncu.py" in said, f"name the file and how to record it again: {said}"
    assert sorted(path.name for path in tmp_path.rglob("*")) == sorted(
        [] if kind == "no such folder" else ["recording", *(["recording.json"] if "cut" in kind else [])]
    ), "nothing may be written for a recording that cannot be read"


def test_verified_table_names_a_broken_summary_and_leaves_the_readme_as_it_was(tmp_path):
    repo = tmp_path / "repo"  # a copy: the script rewrites its README.md
    shutil.copytree(ROOT / "plumbing", repo / "plumbing", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "verified_table.py", repo / "scripts")
    shutil.copy2(ROOT / "README.md", repo / "README.md")
    summary = repo / "docs" / "verified" / "nvidia-t4-cupti" / "summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"environment": {"gpu": "Tesla T4"}})[:25])  # a copy cut short
    done = subprocess.run([sys.executable, "scripts/verified_table.py"], capture_output=True, text=True, cwd=repo)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{summary} cannot be read" in done.stderr and "scripts/run_headless" in done.stderr, done.stderr
    assert (repo / "README.md").read_bytes() == (ROOT / "README.md").read_bytes(), "README.md was rewritten"
