"""What recording/record_ncu.py checks before anything runs: --sections, and its scratch folder (NSPY_RECORD_WORK),
which it empties only if it holds MARKER or nothing: never the clone, a folder above it, HOME or /."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

# Run as recording/record_ncu.py, only recording/ is on sys.path: safe_io is one of the tools, in tools/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import safe_io  # noqa: E402
from recordings import ROOT, RecorderError  # noqa: E402

SETTING = "NSPY_RECORD_WORK"
MARKER = ".nspy-recorder-scratch"  # written by emptied(): this folder is a recorder's, its files may go


def check_scratch_folder(default_name: str, environ=os.environ) -> Path:
    """The scratch folder, or a RecorderError that names the setting and what to do. Deletes and writes nothing."""
    given = environ.get(SETTING)  # ~ expanded as a shell would (refused without HOME), relative to the current folder
    try:
        work = (
            safe_io.expand_home(given, SETTING, environ).resolve() if given else (Path.cwd() / default_name).resolve()
        )
    except safe_io.FileRefused as error:
        raise RecorderError(str(error)) from None
    what = f"{SETTING}={given}" if given else f"the default scratch folder {work} ({SETTING} is not set)"
    fix = f"set {SETTING} to a new or empty folder (the recorder makes it and empties only what it made)"
    home = Path(environ.get("HOME") or Path.home()).expanduser().resolve()
    never = {Path("/"), ROOT, *ROOT.parents, home, *home.parents}
    if work in never:
        raise RecorderError(f"{what} is the clone, HOME, / or a folder above one ({work}): the recorder empties its "
                            f"scratch folder, so it refuses this; {fix}")  # fmt: skip
    if work.exists() and not work.is_dir():
        raise RecorderError(f"{what} is a file, not a folder; {fix}")
    if work.is_dir() and not (work / MARKER).is_file() and any(work.iterdir()):
        raise RecorderError(f"{what} holds files no recorder made (it has no {MARKER}), and the recorder would empty "
                            f"it; {fix}")  # fmt: skip
    return work


def emptied_scratch_folder(default_name: str, environ=os.environ) -> Path:
    """The scratch folder, checked again, made (with MARKER) or emptied of what an earlier run left."""
    work = check_scratch_folder(default_name, environ)
    try:
        for path in [p for p in work.iterdir() if p.name != MARKER] if work.is_dir() else []:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        work.mkdir(parents=True, exist_ok=True)
        (work / MARKER).write_text("made by recording/record_ncu.py; the next run empties it\n")
    except OSError as error:
        raise RecorderError(f"{SETTING}: cannot make or empty the scratch folder {work} ({error}); set {SETTING} "
                            "to a folder you can write") from None  # fmt: skip
    return work


def parse_sections(text: str | None, allowed) -> list[int]:
    """`--sections 2,3,9` (or 2-5) as numbers; every one must be in `allowed`. None (not given): all of them."""
    if text is None:
        return sorted(allowed)
    valid = f"this recorder records sections {sorted(allowed)}"
    numbers: set[int] = set()
    for part in text.split(","):
        # ASCII digits only (str.isdigit takes '²'); a range needs both ends ('2-' is no range)
        if not (bounds := re.fullmatch(r"\s*([0-9]{1,9})\s*(?:-\s*([0-9]{1,9})\s*)?", part)):
            raise RecorderError(f"--sections {text!r}: give section numbers like 2,3,9 or a range like 2-5; {valid}")
        low, high = int(bounds[1]), int(bounds[2] or bounds[1])
        if low > high or high > max(allowed):  # bounded before it is expanded: 2-100000000000 is refused, not built
            raise RecorderError(f"--sections {text!r}: {part.strip()} is not a range of section numbers; {valid}")
        numbers |= set(range(low, high + 1))
    if wrong := sorted(numbers - set(allowed)):
        raise RecorderError(f"--sections {text!r}: {valid}, not {wrong}")
    return sorted(numbers)


def require_cell_modules(modules=("IPython", "matplotlib", "numpy", "pandas")) -> None:
    """Stop before anything runs, naming what to install, unless this Python can import what the cells import."""
    missing = []
    for name in modules:
        try:
            importlib.util.find_spec(name) or missing.append(name)
        except ImportError:  # a finder that refuses it
            missing.append(name)
    if missing:
        raise RecorderError(f"this Python ({sys.executable}) lacks {', '.join(missing)}, which the notebook's cells "
                            "import. Install the harness first: NSPY_TUTORIAL_WHEELHOUSE=$PWD/wheelhouse "
                            "scripts/setup_gpu_runner (offline), or "
                            "python3 -m pip install -r requirements-harness.txt")  # fmt: skip


if __name__ == "__main__":
    sys.exit(
        "recorder_input.py is a module of recording/record_ncu.py, not a command: run python3 recording/record_ncu.py "
        "--help"
    )
