#!/usr/bin/env python3
"""Record the CUPTI half of the notebook (the sections that run on CUPTI) on a GPU machine.

    python3 scripts/record_cupti.py                  # on a GPU machine; offline: NSPY_TUTORIAL_WHEELHOUSE=<wheelhouse>
    python3 scripts/record_cupti.py --sections 8,9   # only these; the others stay as the recording has them
    python3 scripts/record_cupti.py --plan           # anywhere: print which notebook cells it would run

It runs the notebook's own cells in one Python process, as Run all does with NSPY_TUTORIAL_PROFILER=cupti: section
1 (installs into the tutorial's folders, libcupti preloaded, nsight on its CUPTI backend, the environment recorded),
then the other sections' define cells that bind what every section uses (SHARED_NAMES), then each section of
plumbing/cells.py's CUPTI_SECTIONS, its code cells in notebook order (SECTION_PLAN says which define and which run);
the plan is scripts/recordings.py's, as for record_ncu.py. A section recorded without one it reads (8 reads 3's
means) reads that one's values from the CUPTI recording in --dest. Every executed cell's source, output and
recordable values, and each section's status and cost, go to docs/verified/<gpu>-cupti-recording/cupti_recording.json
(scripts/recordings.py). On a CPU,
tests/test_cupti_recordings.py then runs each section's analysis cells on what its run cells bound.
Nothing of the benchmarks lives here: change a benchmark in the notebook and the next recording follows it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import time
import traceback
from pathlib import Path

import recorder_input
import recordings
from recordings import ROOT, RecorderError, encode, load_cells, log_line

from plumbing.cells import CUPTI_SECTIONS

SECTIONS = tuple(sorted(CUPTI_SECTIONS))


def plan(cells: list[dict], sections=SECTIONS) -> list[tuple[int | None, str, str]]:
    """The recording plan (scripts/recordings.py) with section 1 run as Run all runs it."""
    return recordings.plan(cells, sections, run_section_one=True)


def run_sections(namespace: dict, cells: list[dict], steps) -> tuple[dict, dict, dict]:
    """Execute the steps; return ({cell id: run}, {section: wall s}, {section (None: prelude): failed cell id})."""
    runs, seconds, failed = {}, {}, {}
    for number, cell_id, role in steps:
        blocked = recordings.failed_dependency(number, failed)
        if blocked and number not in failed:
            failed[number] = blocked
        if number in failed:
            continue
        started = time.perf_counter()
        log_line(f"[record cupti] section {number or '-'}: cell {cell_id} ({role})")
        source = recordings.source_to_run(cells, cell_id, role)
        try:
            runs[cell_id] = {**recordings.run_cell(namespace, source, cell_id), "role": role}
        except BaseException as error:  # noqa: BLE001 - recorded; section 1 or a prelude cell failing ends the run
            output = getattr(error, "cell_output", "") + "FAILED\n" + traceback.format_exc()
            runs[cell_id] = {"source": source, "output": output, "variables": {}, "role": role, "failed": True}
            log_line(output)
            failed[number] = cell_id
            if number in (1, None):
                break
        seconds[number] = seconds.get(number, 0.0) + time.perf_counter() - started
    return runs, seconds, failed


def recording_of(namespace, runs, seconds, failed, sections, commit, created, wall_s) -> dict:
    """The recording of a run: its provenance, every cell it ran with what it printed and bound, the figures and
    status of each recorded section."""
    env = dict(namespace["ENVIRONMENT"])
    status = namespace.get("SECTIONS", {})
    recording = {
        "format": recordings.FORMAT,
        "what": "CUPTI frames of the notebook's sections, recorded by scripts/record_cupti.py: the notebook's own "
        "cells ran in one process with NSPY_TUTORIAL_PROFILER=cupti, as Run all does on CUPTI.",
        "mode": "cupti",
        "created_utc": created,
        "provenance": {
            "gpu": env["gpu"],
            "driver": env["driver"],
            "nsight_python": env["nsight_python"],
            "cupti_python": recordings.importlib_version("cupti-python"),
            "libcupti": env["libcupti"],
            "torch": env["torch"],
            "torch_cuda": env["torch_cuda"],
            "pandas": namespace["pd"].__version__,
            "python": env["python"],
            "host": socket.gethostname(),
            "notebook_commit": commit,
            "notebook_sha256": recordings.notebook_sha256(),
            "wall_s": round(wall_s, 1),
        },
        "environment": encode(env),
        "sections": {},
        "cells": recordings.recorded_cells(runs, commit, created),
        "figures": encode([figure for figure in namespace.get("FIGURES", []) if figure["section"] in sections]),
    }
    for number in sections:
        cost = {"wall_s": round(seconds.get(number, 0.0), 2)}
        recording["sections"][str(number)] = recordings.section_entry(number, status, failed, cost, commit, created)
    return recording


def record(dest_root: Path, sections: list[int]) -> tuple[Path | None, dict]:
    recordings.require_cell_modules()
    os.environ.update(NSPY_TUTORIAL_PROFILER="cupti", MPLBACKEND="Agg")
    work = recorder_input.emptied_scratch_folder("record_cupti_work")  # checked in main too
    os.environ["NSPY_TUTORIAL_OUT"] = str(work / "out")
    cells = load_cells()
    read = recordings.dependency_recording(sections, dest_root, "cupti")  # before anything runs: a missing one stops
    namespace: dict = {"__name__": "__main__", "RECORDING": read and recordings.load_recording(read)}
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    commit = recordings.notebook_commit()
    started = time.perf_counter()
    runs, seconds, failed = run_sections(namespace, cells, plan(cells, sections))
    if 1 in failed or None in failed:
        return None, failed
    recording = recording_of(namespace, runs, seconds, failed, sections, commit, created, time.perf_counter() - started)
    env = namespace["ENVIRONMENT"]
    dest = dest_root / f"{recordings.gpu_slug(env['gpu'])}-cupti-recording"
    recordings.write_recording(dest, recording, sections)
    return dest, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "docs" / "verified", help="folder for the recording")
    parser.add_argument("--sections", help=f"which sections to record, e.g. 2,3 (default: {SECTIONS})")
    parser.add_argument("--plan", action="store_true", help="print the cells it would run; no GPU")
    args = parser.parse_args(argv)
    try:
        sections = recorder_input.parse_sections(args.sections, SECTIONS)
        if args.plan:
            for number, cell_id, role in plan(load_cells(), sections):
                print(f"section {number or '-'}: {cell_id} ({role})")
            return 0
        recorder_input.check_scratch_folder("record_cupti_work")  # refused before anything runs
        dest, failed = record(args.dest, sections)
    except RecorderError as error:
        print(f"record_cupti: {error}", file=sys.stderr)
        return 2
    if dest is None:
        where = f"section 1 failed in cell {failed[1]}" if 1 in failed else f"shared cell {failed[None]} failed"
        print(f"record_cupti: {where}; nothing was recorded (see above)", file=sys.stderr)
        return 2
    print(f"[record cupti] wrote {dest / recordings.RECORDING_FILES['cupti']}")
    if failed:
        print(f"record_cupti: cells failed: {failed}; the recording in {dest} is partial", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
