#!/usr/bin/env python3
"""Download every wheel the notebook and the headless harness need, for an offline GPU machine.

    python scripts/make_wheelhouse.py --dest DEST --python-version 3.12 [--skip-installed PIP_FREEZE]

On a machine with internet. DEST/: nsight-python, its dependencies, the harness; DEST/cupti/: requirements.txt's CUPTI
set. On the GPU machine NSPY_TUTORIAL_WHEELHOUSE=DEST makes run_headless and the notebook install from it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as scripts/make_wheelhouse.py, only scripts/ is on sys.path: the notebook's plumbing and tools/safe_io.py.
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
import safe_io  # noqa: E402

from plumbing.folders import folder_setting, refusal  # noqa: E402
from plumbing.setup_helpers import cupti_pins as cupti_set  # noqa: E402  (a plain python3 has what it needs)
from plumbing.setup_helpers import normalize, pins_from_requirements  # noqa: E402

MARKER = ".nspy_wheelhouse"  # written into DEST: a folder this script fills
PIP_LIMIT_S = 3600  # seconds one pip download may take (about 2 GB of wheels on a slow line), then it is given up
PLATFORMS = [
    f"manylinux{tag}_x86_64" for tag in ("_2_17", "2014", "_2_24", "_2_25", "_2_27", "_2_28", "_2_31", "_2_34", "1")
] + ["linux_x86_64"]


def wheelhouse_problem(dest: Path) -> str | None:
    """Why DEST is no place for wheels (None: a new or empty folder, a wheelhouse, or one this script marked): the
    notebook's folder rules (plumbing/folders.py: never HOME, /, Python's own folders, a clone, its .git or a folder
    of its tracked files), but that a folder of wheels alone is a wheelhouse already."""
    real = Path(os.path.realpath(dest))
    if (place := refusal(real, MARKER)) and not place.startswith("is a file, or holds files"):
        return place
    if real.is_dir() and not (real / MARKER).exists():
        others = [p.name for p in real.iterdir() if not (p.is_file() and p.suffix == ".whl") and p.name != "cupti"]
        others += [f"cupti/{p.name}" for p in (real / "cupti").glob("*") if p.suffix != ".whl"]
        if others:
            return f"holds files that are no wheels ({', '.join(sorted(others)[:3])}): it is no wheelhouse"
    return None


def python_version(text: str) -> str:
    """A CPython that is, or soon will be (argparse's type): 3.X or 3.X.Y, 3.11 to 3.19."""
    if not re.fullmatch(r"3\.(1[1-9])(\.\d{1,2})?", text):
        raise argparse.ArgumentTypeError(f"{text!r}: give the GPU machine's Python as 3.X or 3.X.Y, 3.11 to 3.19")
    return text


def read_requirements(path: Path) -> tuple[list[str], list[str]]:
    """(main pins, CUPTI pins) as name==version, read from requirements.txt the way the notebook reads it."""
    main, cupti = pins_from_requirements(path.read_text())
    return [f"{name}=={version}" for name, version in main.items()], [f"{n}=={v}" for n, v in cupti.items()]


def read_installed(path: Path | None) -> dict[str, str]:
    """{normalized name: version or ''} from a pip freeze or a plain list of names; ValueError at another line."""
    lines = [line.split("#", 1)[0].strip() for line in safe_io.read_text(path).splitlines()] if path else []
    matches = [(line, re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(?:==\s*([^\s;]+))?", line)) for line in lines if line]
    if bad := [line for line, match in matches if not match]:
        raise ValueError(f"line {bad[0][:60]!r} is no `name` or `name==version`: it is no pip freeze")
    return {normalize(match.group(1)): match.group(2) or "" for _, match in matches}


def download_command(requirements: list[str], dest: Path, python_version: str, deps: bool) -> list[str]:
    """pip download of the manylinux x86_64 CPython wheels of `requirements` for python_version into dest."""
    quiet = ["--quiet", "--disable-pip-version-check"]
    wheels = ["--only-binary=:all:", "--implementation", "cp", "--python-version", python_version]
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    options = [*quiet, "--dest", str(dest), *wheels, *platforms, *([] if deps else ["--no-deps"])]
    return [sys.executable, "-m", "pip", "download", *options, *requirements]


def download(requirements: list[str], dest: Path, python_version: str, deps: bool) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    command = download_command(requirements, dest, python_version, deps)
    print("$ " + " ".join(command))
    subprocess.run(command, check=True, timeout=PIP_LIMIT_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default=str(ROOT / ".whl"), help="wheelhouse folder (default: .whl)")
    parser.add_argument("--python-version", type=python_version, default="3.12", help="the target's Python (3.12)")
    parser.add_argument("--skip-installed", type=Path, help="the target's pip freeze: skip what it has, but the pins")
    args = parser.parse_args(argv)
    try:
        installed = read_installed(args.skip_installed)
    except (ValueError, safe_io.FileRefused) as error:
        parser.error(
            f"--skip-installed {args.skip_installed}: {error}; give the GPU machine's `pip freeze` (the project's "
            "runner: scripts/gpu-runner-installed.txt), or leave the option out"
        )
    fix = "give a new or empty folder, e.g. --dest wheelhouse in the clone (git ignores it)"
    try:  # ~ as a shell expands it: a quoted '~/wh' is not a folder named ~ here
        given, args.dest = args.dest, folder_setting(f"--dest {args.dest}", args.dest, fix)
    except ValueError as error:
        parser.error(str(error))
    if problem := wheelhouse_problem(args.dest):
        parser.error(f"--dest {safe_io.quoted(given)} {problem}; {fix}")
    try:  # before pip runs: a --dest that cannot be made (or is a file) is named, not a traceback
        args.dest.mkdir(parents=True, exist_ok=True)
        (args.dest / MARKER).write_text("made by scripts/make_wheelhouse.py: a wheelhouse\n", encoding="utf-8")
    except OSError as error:
        parser.error(f"--dest {given}: cannot make the wheelhouse folder there ({error.strerror or error})")
    before = {*args.dest.glob("*.whl"), *(args.dest / "cupti").glob("*.whl")}  # these stay, whatever they are
    main_pins = read_requirements(ROOT / "requirements.txt")[0]
    try:
        download([*main_pins, "-r", str(ROOT / "requirements-harness.txt")], args.dest, args.python_version, deps=True)
        cupti = [f"{n}=={v}" for n, v in cupti_set(installed).items()]  # the notebook's rule
        download(cupti, args.dest / "cupti", args.python_version, deps=False)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        ended = f"exit {error.returncode}" if hasattr(error, "returncode") else f"no end within {PIP_LIMIT_S} s"
        print(
            f"pip download failed ({ended}); is PyPI reachable, and are the pins "
            f"available for Python {args.python_version} on {PLATFORMS[0]}?",
            file=sys.stderr,
        )
        return 1
    pinned = {normalize(pin.split("==")[0]) for pin in main_pins}
    for wheel in sorted(set(args.dest.glob("*.whl")) - before):
        if (name := normalize(wheel.name.split("-")[0])) in installed and name not in pinned:
            wheel.unlink()
    for folder in (args.dest, args.dest / "cupti"):
        wheels = list(folder.glob("*.whl"))
        print(f"{folder}: {len(wheels)} wheels, {sum(path.stat().st_size for path in wheels) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
