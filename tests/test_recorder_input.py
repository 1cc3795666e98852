"""What the recorder checks before anything runs: the scratch folder it empties (issue 25: `NSPY_RECORD_WORK=.` once
deleted the clone) and --sections."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest
import recorder_input
from fakes import files_of, fresh_clone, nvidia_smi
from recordings import RecorderError
from support import ROOT


@pytest.fixture()
def machine(tmp_path):
    """A copy of what the recorder imports, a folder of the user's own files beside it, a HOME elsewhere, no GPU."""
    clone = fresh_clone(tmp_path / "above" / "clone")  # its parent holds neither HOME nor the test's other folders
    (clone.parent / "mine").mkdir()
    (clone.parent / "mine" / "thesis.txt").write_text("my own work")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".bashrc").write_text("# mine\n")
    for folder in (clone, clone.parent, tmp_path, tmp_path / "home"):  # marked: only their being these may refuse them
        (folder / recorder_input.MARKER).write_text("")
    nvidia_smi(tmp_path / "bin", gpu=None)
    env = {key: value for key, value in os.environ.items() if not key.startswith("NSPY_")}
    return clone, {**env, "HOME": str(tmp_path / "home"), "PATH": f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"}


# What NSPY_RECORD_WORK names, as the user types it from the clone; "new" is a new folder: refused for no GPU here.
REFUSED = {"the clone": ".", "the folder above the clone": "..", "two folders above the clone": "../..", "HOME": "~",
           "a folder of one's own files": "../mine", "a file": "requirements.txt", "new": "../new"}  # fmt: skip


@pytest.mark.parametrize("kind", REFUSED)
def test_the_recorder_refuses_a_scratch_folder_it_did_not_make_or_a_machine_without_a_gpu_and_writes_nothing(
    machine, tmp_path, kind
):
    clone, env = machine
    before = files_of(tmp_path)
    done = subprocess.run(
        [sys.executable, "recording/record_ncu.py", "--sections", "2", "--dest", str(tmp_path / "dest")],
        cwd=clone, env={**env, "NSPY_RECORD_WORK": REFUSED[kind]}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert files_of(tmp_path) == before, f"NSPY_RECORD_WORK={REFUSED[kind]}: files changed though it refused"
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-1500:]
    named = ["no NVIDIA GPU"] if kind == "new" else [f"NSPY_RECORD_WORK={REFUSED[kind]} ", "set NSPY_RECORD_WORK"]
    assert all(text in done.stderr for text in named), f"name the setting and the fix, first: {done.stderr}"


# "/" only checked: whatever the check answers, nothing is deleted.
@pytest.mark.parametrize(("given", "step"), [("/", "check_scratch_folder"), ("/proc/x/work", "emptied_scratch_folder")])
def test_the_root_folder_or_one_that_cannot_be_made_is_refused_naming_the_setting(tmp_path, given, step):
    with pytest.raises(RecorderError, match=r"NSPY_RECORD_WORK.* set NSPY_RECORD_WORK to"):
        getattr(recorder_input, step)("w", {"NSPY_RECORD_WORK": given, "HOME": str(tmp_path)})


def test_a_scratch_folder_is_made_with_its_marker_and_only_a_marked_or_empty_one_is_emptied(tmp_path):
    env = {"NSPY_RECORD_WORK": str(tmp_path / "work"), "HOME": str(tmp_path / "home")}
    work = recorder_input.emptied_scratch_folder("w", env)
    assert work == tmp_path / "work" and (work / recorder_input.MARKER).is_file(), "a made folder needs the marker"
    (work / "calls").mkdir()
    (work / "calls" / "2-0.pickle").write_text("left by the last run")
    assert sorted(p.name for p in recorder_input.emptied_scratch_folder("w", env).iterdir()) == [recorder_input.MARKER]
    (tmp_path / "empty").mkdir()
    adopted = recorder_input.emptied_scratch_folder("w", {**env, "NSPY_RECORD_WORK": str(tmp_path / "empty")})
    assert (adopted / recorder_input.MARKER).is_file(), "an existing empty folder is adopted (marked)"


@pytest.mark.parametrize(
    ("text", "sections"),
    [("2-5", [2, 3, 4, 5]), ("9,2", [2, 9]), (None, list(range(2, 11))),
     ("5-2", None), ("", None), ("2,", None), ("0-3", None), ("12", None), ("10-11", None),
     ("2-", None), ("-5", None), ("2,,3", None), ("\u00b2", None), ("\u0663", None), ("2-100000000000", None)],
)  # fmt: skip
def test_sections_are_read_as_the_numbers_given_all_by_default_and_others_refused_naming_the_valid_ones(text, sections):
    refusal = rf"^--sections '{text}': .*records sections \[2, 3, 4, 5, 6, 7, 8, 9, 10\]"  # names the valid ones
    with pytest.raises(RecorderError, match=refusal) if sections is None else contextlib.nullcontext():
        assert recorder_input.parse_sections(text, range(2, 11)) == sections


def test_a_huge_range_is_refused_at_once_not_built(tmp_path):
    """--sections 2-100000000000 once built the whole range: under a 1 GiB memory limit, 2-999999999 is refused."""
    import resource

    def one_gib():
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    command = [sys.executable, "recording/record_ncu.py", "--plan", "--sections", "2-999999999"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=one_gib)
    assert done.returncode == 2 and "MemoryError" not in done.stderr, done.stderr[-800:]
    assert "--sections '2-999999999': 2-999999999 is not a range of section numbers" in done.stderr, done.stderr


@pytest.mark.parametrize("module", ["recording/recorder_input.py", "tools/safe_io.py"])
def test_a_module_run_as_a_command_says_which_command_to_run(module):
    done = subprocess.run([sys.executable, module, "--help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and "not a command" in done.stderr, f"{module} --help: say what to run instead"


def test_a_scratch_folder_under_an_empty_home_is_refused_not_put_at_the_root(tmp_path):
    with pytest.raises(RecorderError, match="NSPY_RECORD_WORK=~/work: HOME is empty, so ~ names no folder"):
        recorder_input.check_scratch_folder("w", {"NSPY_RECORD_WORK": "~/work", "HOME": ""})
