#!/usr/bin/env python3
"""Record the notebook's sections 2 to 10 under Nsight Compute on a GPU machine, in launch mode.

    python3 recording/record_ncu.py [--sections 2,3,5] [--plan]

Launch mode because nsight-python 1.1.0 attaches only to ncu 2026.2.1+ and the runner has 2025.3.1: each profiled
call runs `ncu <nsight's flags, --clock-control none> python3 recording/ncu_inner.py --work W --call N-k`
(ncu_launch.py).
The ncu: NSPY_RECORD_NCU (the file or its folder), else the first on PATH; 2025.1 or newer (MIN_NCU).
Writes docs/verified/<gpu>-ncu-<version>/; exit 2 unless every recorded section is ok.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import lzma
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import recorder_input
import recordings
from ncu_launch import NcuGuard, ProfiledCalls, check_nsight_internals, child_env, replay
from recordings import ROOT, RecorderError, load_cells, log_line

from plumbing.cells import NOT_UNDER_NCU, REPORT_FOLDERS, SECTION_DEPENDENCY, SECTION_PLAN, report_folders_of
from plumbing.setup_helpers import parse_ncu_version, version_text

# The recorder's own ncu and launch mode's floor. NCU_PATH is the notebook's setting, with the notebook's floor
# (setup_helpers.NCU_MIN_VERSION, for nsight to attach): the recorder never reads it, so one machine can set both.
NCU_SETTING = "NSPY_RECORD_NCU"
MIN_NCU = (2025, 1)
NCU_FIX = f"set {NCU_SETTING} to an ncu {version_text(MIN_NCU)} or newer (the file or its folder)"
SECTIONS = tuple(SECTION_PLAN)  # 2 to 10: every section that profiles or reads a report
METRIC_NAME = re.compile(r"^[a-z0-9]+__[a-z0-9_]+(\.[a-z0-9_]+)+$")
DEFAULT_METRIC = "gpu__time_duration.sum"  # nsight.analyze.kernel's default metrics


def notebook_metrics(cells: list[dict]) -> list[str]:
    """Every Nsight Compute metric name in the notebook's code cells' strings, plus nsight's default one."""
    import ast

    found = {DEFAULT_METRIC}
    for cell in (cell for cell in cells if cell["type"] == "code"):
        try:
            nodes = ast.walk(ast.parse(cell["source"]))
            found |= {n.value for n in nodes if isinstance(n, ast.Constant) and METRIC_NAME.match(str(n.value))}
        except SyntaxError:
            continue
    return sorted(found)


def require_gpu() -> None:
    """Stop before anything runs on a machine without an NVIDIA GPU or without torch: say where to run instead."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        gpus = listed.returncode == 0 and any(line.startswith("GPU ") for line in listed.stdout.splitlines())
    except (OSError, subprocess.TimeoutExpired):
        gpus = False
    if not gpus:
        raise RecorderError("no NVIDIA GPU here (nvidia-smi -L lists none): run the recorder on a GPU machine "
                            "(docs/maintainers.md); --plan shows here what it would run")  # fmt: skip
    if importlib.util.find_spec("torch") is None:
        raise RecorderError(f"this Python ({sys.executable}) has no torch: run the recorder with the GPU machine's "
                            "Python that has a CUDA build of torch (the recorder never installs one)")  # fmt: skip


def given_ncu(environ=os.environ) -> str | None:
    """NSPY_RECORD_NCU's ncu (the file, or the folder that holds it), None when unset, else a RecorderError."""
    if not (given := environ.get(NCU_SETTING)):
        return None
    path = Path(given) / "ncu" if Path(given).is_dir() else Path(given)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise RecorderError(f"{NCU_SETTING}={given} names no executable ncu: {NCU_FIX}, or unset it")
    return str(path)


def ncu_executable(environ=os.environ) -> str:
    on_path = shutil.which("ncu", path=environ.get("PATH")) or shutil.which("ncu", path="/usr/local/cuda/bin")
    if found := given_ncu(environ) or on_path:
        return found
    raise RecorderError(f"no ncu on PATH: install Nsight Compute, or {NCU_FIX}")


def launch_mode_ncu_version(ncu: str) -> tuple[str, str]:
    """(version, `ncu --version` text) of an ncu launch mode can use (MIN_NCU+), else a RecorderError."""
    text = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout
    version = parse_ncu_version(text)  # the notebook's parser
    if version is None or version[:2] < MIN_NCU:
        raise RecorderError(f"launch mode needs ncu {version_text(MIN_NCU)} or newer; `{ncu} --version` says "
                            f"{text.strip()!r}: {NCU_FIX}")  # fmt: skip
    return version_text(version), text.strip()


def folder_name(gpu: str, ncu_version: str) -> str:
    version = ncu_version.rsplit(".", 1)[0] if ncu_version.count(".") > 2 else ncu_version
    return f"{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}-ncu-{version}"  # NVIDIA H200 -> nvidia-h200


def query_metrics(ncu: str, bases: list[str], dest: Path, version: str) -> int:
    """The suffixes tu104 (the T4's chip) offers for the notebook's base metrics, into the recording; ncu's exit."""
    query = ["--query-metrics-mode", "suffix", "--chip", "tu104", "--metrics", ",".join(bases)]
    suffixes = subprocess.run([ncu, *query], capture_output=True, text=True)
    header = f"# ncu {version}: `ncu {' '.join(query)}`\n"
    (dest / "tu104_metric_suffixes.txt").write_text(header + suffixes.stdout.strip() + "\n")
    return suffixes.returncode


def section_cost(number: int, calls: list[dict], guard_runs: int, wall_s: float) -> dict:
    """What recording section `number` cost: its wall time, the ncu processes it started and their wall time."""
    run_here = [call for call in calls if call.get("section") == number and not call.get("served_from")]
    return {"wall_s": round(wall_s, 2), "ncu_processes": len(run_here) + guard_runs, "profiled_calls": len(run_here),
            "ncu_wall_s": round(sum(call.get("ncu_wall_s") or 0 for call in run_here), 2)}  # fmt: skip


WHAT = ("Nsight Compute frames of the notebook's sections, recorded in ncu launch mode by recording/record_ncu.py: "
        "nsight-python's own profiling session ran under the ncu command line with the flags nsight's attach command "
        "passes; nsight's own extraction and aggregation built the frames.")  # fmt: skip


def keep_report_folders(out_dir: Path, dest: Path, sections: list[int]) -> list[str]:
    """The recorded sections' report folders into the recording (reports xz-compressed: they embed torch's cubins)."""
    kept = [name for name, number in REPORT_FOLDERS.items() if number in sections and (out_dir / name).is_dir()]
    for name in kept:
        shutil.rmtree(dest / name, ignore_errors=True)
        (dest / name).mkdir(parents=True)
        for path in sorted(p for p in (out_dir / name).iterdir() if p.is_file()):
            if path.suffix == ".ncu-rep":
                (dest / name / f"{path.name}.xz").write_bytes(lzma.compress(path.read_bytes(), preset=9))
            else:
                shutil.copy2(path, dest / name / path.name)
    return kept


def needed_reports(sections: list[int], dest_root: Path, work: Path) -> dict | None:
    """The newest recording holding the sections these read but do not record, its reports restored into the run's
    output folder; None when they read none."""
    if not (missing := recordings.missing_dependencies(sections)):
        return None
    loaded = {folder: recordings.load_recording(folder) for folder in recordings.recording_folders(dest_root)}
    usable = [folder for folder, found in loaded.items() if all(str(d) in found["sections"] for d in missing)]
    if not usable:
        together = ",".join(map(str, sorted({*sections, *missing})))
        raise RecorderError(f"sections {sections} read sections {missing}, and no recording in {dest_root} holds "
                            f"them: record them together (--sections {together})")  # fmt: skip
    recordings.restore_report_folders(usable[-1], work / "out")
    for name in (name for number in sections for name in report_folders_of(number)):
        shutil.rmtree(work / "out" / name, ignore_errors=True)  # its own: made again here
    log_line(f"[record] sections {missing} (read by {sections}) from {usable[-1]}")
    return loaded[usable[-1]]


def outer(dest_root: Path, sections: list[int]) -> tuple[Path, dict]:
    recorder_input.require_cell_modules()  # before nsight or torch: what is missing is named, not a traceback
    require_gpu()
    import nsight
    import pandas as pd
    import torch

    check_nsight_internals()
    ncu = ncu_executable()
    version, ncu_says = launch_mode_ncu_version(ncu)
    # As section 1 does: the environment names this ncu, and the inner process finds it first on PATH.
    os.environ["PATH"] = os.pathsep.join([str(Path(ncu).parent), os.environ["PATH"]])
    work = recorder_input.emptied_scratch_folder("record_ncu_work")  # checked in main too
    (work / "calls").mkdir(parents=True)
    os.environ.update(child_env(work))
    recorded = needed_reports(sections, dest_root, work)
    calls = ProfiledCalls(work, "outer", ncu=ncu)
    cells = load_cells()
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with NcuGuard(ncu) as guard:
        done = replay(recordings.plan(cells, sections), calls, guard, recorded=recorded)
    namespace, failed = done["namespace"], done["failed"]
    if None in failed:
        raise RecorderError(f"shared cell {failed[None]} failed; nothing was recorded (its traceback is above)")
    dest = dest_root / folder_name(namespace["ENVIRONMENT"]["gpu"], version)
    provenance = {
        "ncu_version": version, "ncu_version_text": ncu_says, "ncu_path": ncu, "nsight_python": nsight.__version__,
        "ncu_report": next((d.version for d in importlib.metadata.distributions(name="ncu-report")), "not installed"),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "pandas": pd.__version__,
        "python": sys.version.split()[0]}  # fmt: skip

    def cost(number):
        return section_cost(number, calls.calls, done["ncu_runs"].get(number, 0), done["wall_s"].get(number, 0.0))

    commit = recordings.notebook_commit()
    recording = recordings.new_recording(WHAT, provenance, namespace, done, sections, commit, created, cost)
    settings = recordings.benchmark_setting_names(cells, sections)
    recording["define_values"] = recordings.setting_values(namespace, settings)
    recording["calls"] = calls.calls
    path = recordings.write_recording(dest, recording, sections)
    kept = keep_report_folders(work / "out", dest, sections)
    queried = query_metrics(ncu, sorted({metric.split(".", 1)[0] for metric in notebook_metrics(cells)}), dest, version)
    log_line(f"[record] wrote {path}; query-metrics exit {queried}; report folders kept: {kept}")
    for number in sections:
        info = recording["sections"][str(number)]
        log_line(f"[record] section {number}: {info['status']} {info['reason']} cost {info['cost']}")
    return dest, failed  # the scratch folder stays as the calls left it, until the next run empties it


def print_plan(sections: list[int]) -> None:
    for section, cell_id, role in recordings.plan(cells := load_cells(), sections):
        under = ", each profiled call under its own ncu" if role == "run" and cell_id not in NOT_UNDER_NCU else ""
        print(f"section {section or '-'}: {cell_id} ({role}{under})")
    for number in recordings.missing_dependencies(sections):
        print(f"section {number}: read by {[n for n in sections if number in SECTION_DEPENDENCY.get(n, ())]}, "
              "taken from the recording in docs/verified (values and reports), not recorded again")  # fmt: skip
    print("metrics in the notebook:", ", ".join(notebook_metrics(cells)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "docs" / "verified", help="folder for the recording")
    parser.add_argument("--sections", help=f"which sections to record, e.g. 2,3,9 or 2-5 (default: {SECTIONS})")
    parser.add_argument("--plan", action="store_true", help="print the cells it would run and the metrics; no GPU")
    args = parser.parse_args(argv)
    os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # before nsight is imported: ncu profiles from outside
    try:
        sections = recorder_input.parse_sections(args.sections, SECTIONS)
        if args.plan:
            print_plan(sections)
            return 0
        recorder_input.check_scratch_folder("record_ncu_work")  # refused before the GPU checks, as is
        if given := given_ncu():  # an NSPY_RECORD_NCU that is no ncu, or too old
            launch_mode_ncu_version(given)
        dest, failed = outer(args.dest, sections)
    except RecorderError as error:
        print(f"record_ncu: {error}", file=sys.stderr)
        return 2
    if failed:
        print(f"record_ncu: sections failed: {failed} (cell ids); the rest is recorded in {dest}", file=sys.stderr)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
