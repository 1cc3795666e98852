#!/usr/bin/env python3
"""Keep a headless run as evidence: copy its output folder into docs/verified/<gpu>-<profiler>/.

python tools/keep_run.py OUT_DIR [--command "recording/run_launch_mode"]

Everything the run wrote but its marker and section 9's installed packages, each .ncu-rep xz-compressed (they
embed torch's kernels); run_info.json gains the GPU, the profiler and the command, and the reading page is written
again.
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import shutil
import sys
from pathlib import Path

import reading_page
from verified_table import NOTEBOOK, ROOT

SKIPPED = {".nspy_tutorial_out"}  # run_headless's mark on its output folder
INSTALLED = {"cupti13"}  # section 9's %pip --target folder: installed packages (80 MB), not evidence


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def folder_name(environment: dict) -> str:
    """<gpu>-cupti, <gpu>-ncu-<version>, or <gpu>-ncu-<version>-launch for Nsight Compute's launch mode."""
    profiler = environment["profiler"]
    if profiler == "ncu":
        profiler += f"-{environment['ncu_version']}" + ("-launch" if environment.get("ncu_mode") else "")
    return f"{slug(environment['gpu'])}-{slug(profiler)}"


def keep(out: Path, command: str, verified: Path = ROOT / "docs" / "verified") -> Path:
    """The run in `out` kept in verified/<folder_name>; SystemExit naming the files a finished run has and it lacks."""
    if missing := [name for name in (NOTEBOOK.name, "summary.json", "run_info.json") if not (out / name).is_file()]:
        raise SystemExit(f"keep_run.py: {out} lacks {', '.join(missing)}: give the folder scripts/run_headless wrote")
    summary, run_info = (json.loads((out / name).read_text()) for name in ("summary.json", "run_info.json"))
    environment = summary["environment"]
    dest = verified / folder_name(environment)
    staged = verified / f".{dest.name}.partial"  # whole or not at all: the old evidence stays until the new is in
    shutil.rmtree(staged, ignore_errors=True)
    for path in sorted(out.rglob("*")):
        target = staged / path.relative_to(out)
        if path.name in SKIPPED or not path.is_file() or path.relative_to(out).parts[0] in INSTALLED:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".ncu-rep":
            target.with_name(path.name + ".xz").write_bytes(lzma.compress(path.read_bytes(), preset=9))
        else:
            shutil.copy2(path, target)
    facts = {key: environment.get(key) for key in ("gpu", "driver", "profiler", "ncu_version", "ncu_mode")}
    (staged / "run_info.json").write_text(json.dumps({**run_info, **facts, "command": command}, indent=1) + "\n")
    reading_page.write_page(staged)  # again: its first note names the command
    shutil.rmtree(dest, ignore_errors=True)
    staged.rename(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the run's output folder")
    parser.add_argument("--command", default="scripts/run_headless", help="the command that made the run")
    args = parser.parse_args(argv)
    print(f"kept in {keep(args.out.resolve(), args.command).relative_to(ROOT)}: now run tools/verified_table.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
