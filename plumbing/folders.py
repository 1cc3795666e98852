"""The one set of rules for a folder the project writes into: the notebook's output and CUPTI folders and
scripts/run_headless's output folder. A folder is the project's own only if it is new, empty, or carries the mark the
project put there; never /, HOME or a folder above it, one of Python's own folders (its packages: pip --upgrade there
deletes theirs), a folder above or inside one, or a git clone, its .git or folders of tracked files (committed
evidence included). Nothing is written until a folder passes.
"""

import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

ON_COLAB = "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ
OUTPUT_FOLDER = "nspy_tutorial_out"  # the default output folder, for the notebook and scripts/run_headless alike
MARK = ".nspy_tutorial_out"  # in every folder the notebook or run_headless made (output, CUPTI): it is theirs


def folder_setting(name, given, fix, environ=os.environ):
    """A folder setting as an absolute path, ~ and ~user as a shell expands them; `name` says where it was given
    ("NSPY_TUTORIAL_OUT=~/x"): a refusal starts with it and ends with `fix`."""
    home = environ.get("HOME", "") if given == "~" or given.startswith("~/") else None
    path = os.path.expanduser(given) if home is None else home + given[1:]
    if given != given.strip() or not given or home == "" or path.startswith("~"):
        why = "a blank at either end, HOME empty or unset, or no such ~user here"
        raise ValueError(f"{name}: {given!r} names no folder ({why}). {fix}")
    return Path(os.path.abspath(path))


def git(folder, *args):
    """What git answers in `folder` (its nearest existing folder); '' where git is missing or fails."""
    where = next(parent for parent in [folder, *folder.parents] if parent.is_dir())
    try:
        return subprocess.run(["git", "-C", where, *args], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def refusal(real, mark, environ=os.environ):
    """Why the project may not write into the folder `real` (resolved), or None."""
    home = Path(os.path.realpath(environ.get("HOME") or "/"))
    python = {Path(os.path.realpath(p)) for p in [*sysconfig.get_paths().values(), site.getusersitepackages()]}
    top = Path(git(real, "rev-parse", "--show-toplevel") or "/nonexistent")
    below_top = [folder for folder in [real, *real.parents] if top in folder.parents]
    entries = [*real.iterdir()] if real.is_dir() else []
    if real == home or real in home.parents:
        return "is /, HOME or a folder above HOME"
    if any(real == folder or real in folder.parents or folder in real.parents for folder in python):
        return "is, holds or is inside one of Python's own folders (its packages)"
    if real == top or ".git" in real.parts or any(git(folder, "ls-files", "--", folder) for folder in below_top):
        return "is a git clone, its .git or in a folder of its tracked files (copy a run there after it ran)"
    if real.exists() and not real.is_dir() or entries and not (real / mark).is_file():
        return f"is a file, or holds files this project did not make (it has no {mark})"
    if links := [entry.name for entry in entries if entry.is_symlink()]:
        return f"holds a link ({links[0]}): a write would follow it into a file this project did not make"
    return None


def own_folder(name, folder, fix, environ=os.environ):
    """The folder, resolved, made and marked if the project may write into it; else ValueError naming `name`."""
    real = Path(os.path.realpath(folder))
    if why := refusal(real, MARK, environ):
        raise ValueError(f"{name}: {real} {why}. {fix}")
    try:
        if not (real / MARK).is_file():
            real.mkdir(parents=True, exist_ok=True)
            (real / MARK).write_text("made by the nsight-python tutorial: its next run may replace what is here\n")
    except OSError as error:
        raise ValueError(f"{name}: {real} cannot be made or written ({error.strerror or error}). {fix}") from None
    return real


def choose_output_dir(environ=os.environ, on_colab=ON_COLAB):
    """NSPY_TUTORIAL_OUT, else OUTPUT_FOLDER under /content on Colab, else in the current folder (checked later)."""
    default = Path("/content", OUTPUT_FOLDER) if on_colab else Path(OUTPUT_FOLDER)
    return Path(os.path.expanduser(environ.get("NSPY_TUTORIAL_OUT") or default)).resolve()


def setting_folder(setting, default, environ=os.environ):
    """The folder a setting names (else `default`) by the folder rules, made and marked; else ValueError naming it."""
    given, fix = environ.get(setting), f"Set {setting} to a new or empty folder you can write to, or unset it."
    name = f"{setting}={given}" if given else f"the default folder {default}"
    return own_folder(name, folder_setting(name, given, fix, environ) if given else default, fix, environ)


def prepare_output_dir(folder, environ=os.environ):
    """The output folder (NSPY_TUTORIAL_OUT, else the default `folder`) made and marked, or ValueError naming it."""
    return setting_folder("NSPY_TUTORIAL_OUT", folder, environ)
