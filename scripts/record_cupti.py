#!/usr/bin/env python3
"""Record the CUPTI half of the notebook (the sections that run on CUPTI) on a GPU machine.

    python3 scripts/record_cupti.py                  # on a GPU machine; offline: NSPY_TUTORIAL_WHEELHOUSE=<wheelhouse>
    python3 scripts/record_cupti.py --sections 8,9   # only these; the others stay as the recording has them
    python3 scripts/record_cupti.py --plan           # anywhere: print which notebook cells it would run

The plan and the executor are scripts/recordings.py's, as for record_ncu.py; what differs is the backend: the cells
run in one Python process as Run all does with NSPY_TUTORIAL_PROFILER=cupti, section 1 included (installs, libcupti
preloaded, nsight on CUPTI, the environment recorded). The recording goes to
docs/verified/<gpu>-cupti-recording/cupti_recording.json.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import recorder_input
import recordings
from recordings import ROOT, RecorderError, load_cells

from plumbing.cells import CUPTI_SECTIONS

SECTIONS = tuple(sorted(CUPTI_SECTIONS))


def plan(cells: list[dict], sections=SECTIONS) -> list[tuple[int | None, str, str]]:
    """The recording plan (scripts/recordings.py) with section 1 run as Run all runs it."""
    return recordings.plan(cells, sections, run_section_one=True)


def run_sections(namespace: dict, cells: list[dict], steps) -> tuple[dict, dict, dict]:
    """recordings.execute(): ({cell id: run}, {section: wall s}, {section (None: prelude): failed cell id})."""
    done = recordings.execute(steps, namespace, stop=(1, None))
    return done["runs"], done["wall_s"], done["failed"]


WHAT = (
    "CUPTI frames of the notebook's sections, recorded by scripts/record_cupti.py: the notebook's own cells ran in "
    "one process with NSPY_TUTORIAL_PROFILER=cupti, as Run all does on CUPTI."
)


def recording_of(namespace, runs, seconds, failed, sections, commit, created, wall_s) -> dict:
    """The recording of a run: provenance, every cell it ran with what it printed and bound, the sections."""
    env = namespace["ENVIRONMENT"]
    provenance = {key: env[key] for key in ("nsight_python", "libcupti", "torch", "torch_cuda", "python")}
    provenance.update(cupti_python=recorder_input.importlib_version("cupti-python"), pandas=namespace["pd"].__version__)
    done = {"runs": runs, "failed": failed}
    recording = recordings.new_recording("cupti", WHAT, provenance, namespace, done, sections, commit, created,
                                         lambda number: {"wall_s": round(seconds.get(number, 0.0), 2)})  # fmt: skip
    recording["provenance"]["wall_s"] = round(wall_s, 1)
    return recording


def record(dest_root: Path, sections: list[int]) -> tuple[Path | None, dict]:
    recorder_input.require_cell_modules()
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
    dest = dest_root / f"{recorder_input.gpu_slug(env['gpu'])}-cupti-recording"
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
