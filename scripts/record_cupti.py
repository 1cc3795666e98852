#!/usr/bin/env python3
"""Record the CUPTI half of the notebook (sections 2, 3, 5, 8 and the CUPTI side of 9) on a GPU machine.

    python3 scripts/record_cupti.py            # on a GPU machine; offline: NSPY_TUTORIAL_WHEELHOUSE=<wheelhouse>
    python3 scripts/record_cupti.py --plan     # anywhere: print which notebook cells it would run

It runs the notebook's own cells in one Python process, as Run all does with NSPY_TUTORIAL_PROFILER=cupti: section
1 (installs into the tutorial's folders, libcupti preloaded, nsight on its CUPTI backend, the environment recorded),
then, for each section in RECORDED, its opener, define, run and analysis cells. What the run cells bound (frames,
rows, results), the define cells' settings and every cell's output go to
docs/verified/<gpu>-cupti-recording/cupti_recording.json, with the provenance scripts/record_ncu.py writes. On a
CPU, tests/test_cupti_recordings.py then runs each section's analysis and figure cells on those variables.
Nothing of the benchmarks lives here: change a benchmark in the notebook and the next recording follows it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path

import record_ncu
from record_ncu import ROOT, cell_source, encode, load_cells, opener_id, run_cell, top_level_names

from plumbing.cells import CUPTI_SECTIONS, section_of

RECORDING_FILE = "cupti_recording.json"
# The cells that profile (run) and those that only define what they use; every other code cell of the section,
# its folded figure cell included, is analysis: it reads only what these bound, and runs on a CPU from the recording.
RECORDED = {
    2: {"define": ("s2-define",), "run": ("s2-run",)},
    3: {"define": ("s3-define", "s3-timing-define"), "run": ("s3-run", "s3-timing-run")},
    5: {"define": ("s5-define", "s5-each", "s5-normalize"), "run": ("s5-run", "s5-ratio")},
    8: {"define": ("s8-timestamps", "s8-collectors", "s8-limits", "s8-define"), "run": ("s8-run",)},
    9: {"define": ("s9-child", "s9-define"), "run": ("s9-cupti",)},
}
ENCODABLE = (int, float, str, list, tuple, dict)


def section_one_cell_ids(cells: list[dict]) -> list[str]:
    return [cell["id"] for cell in cells if cell["type"] == "code" and section_of(cell["id"]) == 1]


def analysis_cell_ids(cells: list[dict], number: int) -> list[str]:
    """Section `number`'s code cells other than its opener, define and run cells, in notebook order."""
    return record_ncu.analysis_cell_ids(cells, number, RECORDED[number])


def plan(cells: list[dict]) -> list[tuple[int | None, str]]:
    """(section, cell id) in the order the recorder executes them; every id must exist."""
    if set(RECORDED) != set(CUPTI_SECTIONS):
        raise record_ncu.RecorderError(
            f"RECORDED covers sections {sorted(RECORDED)}, plumbing/cells.py says {sorted(CUPTI_SECTIONS)} run on CUPTI"
        )
    steps = [(1, cell_id) for cell_id in section_one_cell_ids(cells)]
    for number, spec in RECORDED.items():
        ids = [opener_id(number), *spec["define"], *spec["run"], *analysis_cell_ids(cells, number)]
        steps += [(number, cell_id) for cell_id in ids]
    for _, cell_id in steps:
        cell_source(cells, cell_id)
    return steps


def recorded_names(cells: list[dict], number: int, part: str) -> list[str]:
    return sorted({name for cell_id in RECORDED[number][part] for name in top_level_names(cell_source(cells, cell_id))})


def run_sections(namespace: dict, cells: list[dict]) -> tuple[dict, dict, dict]:
    """Execute the plan; return ({cell id: output}, {section: wall s}, {section: failed cell id})."""
    outputs, seconds, failed = {}, {}, {}
    for number, cell_id in plan(cells):
        if number in failed:
            continue
        started = time.perf_counter()
        record_ncu.log_line(f"[record cupti] section {number}: cell {cell_id}")
        try:
            outputs[cell_id] = run_cell(namespace, cells, cell_id)
        except BaseException:  # noqa: BLE001 - recorded; section 1 failing ends the run, a later section only itself
            outputs[cell_id] = "FAILED\n" + traceback.format_exc()
            record_ncu.log_line(outputs[cell_id])
            failed[number] = cell_id
            if number == 1:
                break
        seconds[number] = round(seconds.get(number, 0.0) + time.perf_counter() - started, 2)
    return outputs, seconds, failed


def record(dest_root: Path) -> tuple[Path | None, dict]:
    os.environ.update(NSPY_TUTORIAL_PROFILER="cupti", MPLBACKEND="Agg")
    work = record_ncu.work_folder("record_cupti_work")
    os.environ["NSPY_TUTORIAL_OUT"] = str(work / "out")
    cells = load_cells()
    namespace: dict = {"__name__": "__main__"}
    started = time.perf_counter()
    outputs, seconds, failed = run_sections(namespace, cells)
    if 1 in failed:
        return None, failed
    env = dict(namespace["ENVIRONMENT"])
    recording = {
        "what": "CUPTI frames of the notebook's sections 2, 3, 5, 8 and 9, recorded by scripts/record_cupti.py: the "
        "notebook's own cells ran in one process with NSPY_TUTORIAL_PROFILER=cupti, as Run all does on CUPTI.",
        "mode": "cupti",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "provenance": {
            "gpu": env["gpu"],
            "driver": env["driver"],
            "nsight_python": env["nsight_python"],
            "cupti_python": record_ncu.importlib_version("cupti-python"),
            "libcupti": env["libcupti"],
            "torch": env["torch"],
            "torch_cuda": env["torch_cuda"],
            "pandas": namespace["pd"].__version__,
            "python": env["python"],
            "host": socket.gethostname(),
            **record_ncu.notebook_provenance(cells, [cell_id for _, cell_id in plan(cells)]),
        },
        "environment": encode(env),
        "wall_s": {"total": round(time.perf_counter() - started, 1), "per_section": seconds},
        "sections": {},
        "cell_output": outputs,
        "failed_cells": failed,
        "figures": encode(list(namespace["FIGURES"])),
    }
    for number in RECORDED:
        values = {}
        for part in ("define", "run"):
            for name in recorded_names(cells, number, part):
                value = namespace.get(name)
                if isinstance(value, ENCODABLE) or type(value).__module__.startswith(("pandas", "numpy")):
                    values[name] = encode(value)
        recording["sections"][str(number)] = values
    dest = dest_root / f"{record_ncu.gpu_slug(env['gpu'])}-cupti-recording"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / RECORDING_FILE).write_text(json.dumps(recording, indent=1, allow_nan=False) + "\n")
    return dest, failed


def load_cupti_recording(folder: Path) -> dict:
    """cupti_recording.json with its environment and each section's variables decoded."""
    recording = json.loads((Path(folder) / RECORDING_FILE).read_text())
    recording["environment"] = record_ncu.decode(recording["environment"])
    recording["sections"] = {
        int(number): {name: record_ncu.decode(value) for name, value in values.items()}
        for number, values in recording["sections"].items()
    }
    return recording


def cupti_recording_folders(root: Path = ROOT) -> list[Path]:
    return sorted(path.parent for path in (root / "docs" / "verified").glob(f"*/{RECORDING_FILE}"))


def cpu_section_one_source(folder: Path | str, scripts: Path | str = ROOT / "scripts") -> str:
    """A folded cell for a kernel that ran the harness: section 1's names as the CUPTI run left them, no GPU."""
    return record_ncu.cpu_section_one_source(folder, scripts, loader="record_cupti.load_cupti_recording")


def inject_source(number: int) -> str:
    """A folded cell that sets section `number`'s recorded variables (after cpu_section_one_source ran)."""
    return (
        f"# @title Section {number}: what its define and run cells bound on the GPU machine (recorded)\n"
        f"globals().update(RECORDING['sections'][{number}])\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "docs" / "verified", help="folder for the recording")
    parser.add_argument("--plan", action="store_true", help="print the cells it would run; no GPU")
    args = parser.parse_args(argv)
    if args.plan:
        for number, cell_id in plan(load_cells()):
            print(f"section {number}: {cell_id}")
        return 0
    dest, failed = record(args.dest)
    if dest is None:
        print(f"record_cupti: section 1 failed in cell {failed[1]}; nothing was recorded (see above)", file=sys.stderr)
        return 2
    print(f"[record cupti] wrote {dest / RECORDING_FILE}")
    if failed:
        print(f"record_cupti: cells failed: {failed}; the recording in {dest} is partial", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
