#!/usr/bin/env python3
"""Record the notebook's sections 2 to 10 under Nsight Compute on a GPU machine, in launch mode.

    python3 scripts/record_ncu.py                      # on a GPU machine with ncu 2025.1+ on PATH (or NCU_PATH)
    python3 scripts/record_ncu.py --sections 2,3,5     # only these; the others stay as the recording has them
    python3 scripts/record_ncu.py --plan               # anywhere: the cells it would run, the metrics; no GPU

Why launch mode: nsight-python 1.1.0 attaches ncu 2026.2.1+ to the running process. Where only an older ncu
exists (the project's GPU runner has 2025.3.1), nsight's own profiling session can still run as a script under the
ncu command line, with the flags of nsight's own attach command (built by nsight, minus --mode attach and
--process-id, plus --nvtx), always with `--clock-control none` (the runner is shared and its clocks stay as they
are; see RUNNER_CLOCK_CONTROL):

    ncu --nvtx --nvtx-include regex:nsight-python@.+ --log-file LOG --cache-control <all|none>
        --clock-control none --replay-mode <kernel|range> --metrics <list> -f -o REPORT python3 ...

How: this script (the outer process) runs the notebook's own cells by id (scripts/recordings.py; the plan is
plumbing/cells.py's SECTION_PLAN), each section in notebook order, in a namespace where `nsight` was imported with
NSPY_NCU_INIT_AT_IMPORT=0 and section 1's names were made with the notebook's own plumbing. nsight's
NCUCollector.collect runs unchanged; the module-level functions it calls are patched (PATCHED_FUNCTIONS):
activating Nsight Compute and begin/end profiling do nothing (ncu launches the process), launch_ncu starts
`ncu ... python3 record_ncu.py --inner --call N-k` with nsight's own flags, and run_profile_session is left to that
inner process. One ncu process per profiled call: nsight reads each call from its own report, and a call's ncu
flags (metrics, cache control, replay mode) are its own. The inner replays the shared define cells and section N's
define and run cells, serves the section's calls before k from what the outer extracted, runs call k with nsight's
own run_profile_session, and exits. collect then waits for ncu and reads the report with nsight's own extraction
and aggregation, so the notebook's variables hold exactly what to_dataframe() built from real reports. Section
10's own ncu command line runs from the outer; every ncu that profiles must have `--clock-control none`
(NcuGuard). A release of nsight-python whose collect no longer calls these functions, or calls them with other
parameters, stops the recorder with a message naming what moved (check_nsight_internals).

Output, in docs/verified/<gpu>-ncu-<version>/ (or --dest); with --sections, merged into what is there:
  recording.json                 provenance; every executed cell's source, output and recordable values; each
                                 section's status and cost (wall time, ncu processes and their wall time); calls
  s7_fusion/                     what section 7's call left in its folder (report as .ncu-rep.xz), for section 10
  s10_sections/                  s10-profile's ncu report (SpeedOfLight, LaunchStats, Occupancy) of the fused kernel
  s10_stalls/                    s10-stalls-profile's ncu report (WarpStateStats) of section 6's kernel furthest below
                                 its roof; s10-details' `ncu --import ... --page details` output is its cell output
  tu104_metrics.txt              `ncu --query-metrics --chip tu104` lines of the metric families the notebook uses
  tu104_metric_suffixes.txt      `ncu --query-metrics-mode suffix --chip tu104` for the notebook's base metrics
Exit status: 0 when every recorded section is ok, 2 otherwise (with what failed, the rest still written).
"""

from __future__ import annotations

import argparse
import datetime
import json
import lzma
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

import recorder_input
import recordings
from ncu_launch import InnerDone, NcuGuard, ProfiledCalls, check_nsight_internals, child_env
from recordings import ROOT, RecorderError, encode, load_cells, log_line

from plumbing.cells import (
    NOT_UNDER_NCU,
    REPORT_FOLDERS,
    SECTION_DEPENDENCY,
    SECTION_ONE_NAMES,
    SECTION_PLAN,
    SETUP_HELPERS,
    report_folders_of,
)
from plumbing.setup_helpers import parse_ncu_version, version_text

MIN_NCU = (2025, 1)
SECTIONS = tuple(number for number in SECTION_PLAN)  # 2 to 10: every section that profiles or reads a report
METRIC_NAME = re.compile(r"^[a-z0-9]+__[a-z0-9_]+(\.[a-z0-9_]+)+$")
DEFAULT_METRIC = "gpu__time_duration.sum"  # nsight.analyze.kernel's default metrics
METRIC_FAMILY = re.compile(r"(?<![A-Za-z0-9_])([a-z0-9]+)__[a-z]")  # lts__t_bytes.sum -> lts


def _code_strings(cells: list[dict]):
    """Every string constant in the notebook's code cells (an f-string's literal parts too)."""
    import ast

    for cell in cells:
        if cell["type"] != "code":
            continue
        try:
            tree = ast.parse(cell["source"])
        except SyntaxError:
            continue
        yield from (
            node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
        )


def notebook_metrics(cells: list[dict]) -> list[str]:
    """Every Nsight Compute metric name written in the notebook's code cells, plus nsight's default one."""
    return sorted({DEFAULT_METRIC} | {text for text in _code_strings(cells) if METRIC_NAME.match(text)})


def metric_families(cells: list[dict]) -> list[str]:
    """The metric families (`lts__`, `launch__`, `smsp__`, ...) of every metric name the notebook writes: whole
    names, names built in an f-string (launch__occupancy_limit_{kind}) and patterns (smsp__..._stalled_(\\w+))."""
    found = {DEFAULT_METRIC.split("__", 1)[0]}
    for text in _code_strings(cells):
        found |= set(METRIC_FAMILY.findall(text))
    return sorted(f"{family}__" for family in found)


def inner_plan(cells: list[dict], section: int) -> list[tuple[int | None, str, str]]:
    """What an inner process under ncu replays for a call of `section`: the shared define cells, then the
    section's define and run cells (not the CUPTI child, not section 10's own ncu command line)."""
    return [
        step
        for step in recordings.plan(cells, [section])
        if step[2] in ("prelude", "define", "gpu_define", "run") and step[1] not in NOT_UNDER_NCU
    ]


# ---------------------------------------------------------------- running the plan
LAUNCH_MODE = {
    "active_tool": "none (ncu launch mode: ncu runs the process, nothing attaches)",
    "profiler": "ncu (launch mode, scripts/record_ncu.py)",
}


def section_one_names(namespace: dict, environment: dict | None = None):
    """The names section 1 leaves for later sections (plumbing/cells.py), made with the functions section 1 uses,
    after the harness and setup-helper cells ran in namespace. `environment` overrides what they record."""
    import nsight  # NSPY_NCU_INIT_AT_IMPORT=0: nothing is loaded; ncu runs this process from outside
    import torch

    facts = namespace["environment_facts"](torch, nsight, True, "", namespace.get("LIBCUPTI"))
    name_section_one(namespace, {**facts, **(environment or {})}, torch)


def name_section_one(namespace: dict, environment: dict, torch) -> None:
    """Section 1's names from the environment it recorded (the GPU machine's facts), and what IPython gives every
    notebook cell without an import (`display`: the cells run here by exec, not in IPython)."""
    import matplotlib

    matplotlib.use("Agg")
    import nsight
    import numpy as np
    import pandas as pd
    from IPython.display import display

    namespace["ENVIRONMENT"].update(environment)
    namespace.update(nsight=nsight, torch=torch, pd=pd, np=np, QUIET=nsight.VerbosityLevel.SILENT, display=display)
    namespace.update(USE_NCU=True, CUPTI_REASON="")
    values = namespace["section_one_values"](namespace["ENVIRONMENT"])
    namespace.update(zip(("L2_BYTES", "PEAKS_LABEL", "PEAKS"), values, strict=True))
    missing = [name for name in SECTION_ONE_NAMES if name not in namespace]
    if missing:
        raise RecorderError(f"section 1's names {missing} are not made here: update section_one_names")


def replay(steps, calls: ProfiledCalls, guard: NcuGuard | None = None, log=log_line, recorded=None) -> dict:
    """Run the steps' cells. Returns {"namespace", "runs": {cell id: run}, "failed": {section: cell id},
    "wall_s": {section: s}, "ncu_runs": {section: ncu processes its own cells started}}.

    A failing shared cell stops everything; a failing section cell stops its section only (outer), and the
    sections that read it (SECTION_DEPENDENCY). In an inner process every failure propagates: the outer reports it
    from ncu's output. `recorded`: the recording whose values stand in for a "recorded ..." step's run cells."""
    cells = load_cells()
    done = {"namespace": {"__name__": "__main__"}, "runs": {}, "failed": {}, "wall_s": {}, "ncu_runs": {}}
    namespace, failed = done["namespace"], done["failed"]
    namespace["RECORDING"] = recorded
    for section, cell_id, role in steps:
        blocked = recordings.failed_dependency(section, failed)
        if blocked and section not in failed:
            failed[section] = blocked
        if section in failed:
            continue
        calls.where = (section, cell_id)
        calls.allowed = role == "run"
        log(f"[record] section {section or '-'}: cell {cell_id} ({role})")
        source = recordings.source_to_run(cells, cell_id, role)
        started, ncu_runs = time.perf_counter(), len(guard.runs) if guard else 0
        try:
            done["runs"][cell_id] = {**recordings.run_cell(namespace, source, cell_id), "role": role}
        except InnerDone:
            raise
        except BaseException as error:
            if calls.role == "inner":
                raise
            output = getattr(error, "cell_output", "") + "FAILED\n" + traceback.format_exc()
            done["runs"][cell_id] = {"source": source, "output": output, "variables": {}, "role": role, "failed": True}
            log(output)
            failed[section] = cell_id
            if section is None:
                break
        finally:
            done["wall_s"][section] = done["wall_s"].get(section, 0.0) + time.perf_counter() - started
            done["ncu_runs"][section] = done["ncu_runs"].get(section, 0) + (len(guard.runs) - ncu_runs if guard else 0)
        if cell_id == SETUP_HELPERS:  # then the names section 1 defines, before any cell that uses them
            section_one_names(namespace, environment=LAUNCH_MODE)
            calls.install()
    return done


# ---------------------------------------------------------------- provenance
def require_gpu(environ=os.environ) -> None:
    """Stop before anything runs on a machine without an NVIDIA GPU or without torch: say where to run instead."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, env=environ)
        lines = listed.stdout.splitlines() if listed.returncode == 0 else []
        gpus = [line for line in lines if line.startswith("GPU ")]
    except (OSError, subprocess.TimeoutExpired):
        gpus = []
    if not gpus:
        raise RecorderError(
            "no NVIDIA GPU here (nvidia-smi -L lists none): the recorder profiles the notebook's kernels. Run it on a "
            "GPU machine (README: Re-recording the Nsight Compute data); --plan shows here what it would run"
        )
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise RecorderError(
            f"this Python ({sys.executable}) has no torch: run the recorder with the GPU machine's Python that has a "
            "CUDA build of torch (the recorder never installs one)"
        )


def ncu_executable() -> str:
    given = os.environ.get("NCU_PATH")
    if given:
        path = Path(given)
        path = path / "ncu" if path.is_dir() else path
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RecorderError(f"NCU_PATH={given} names no executable ncu: point it at an ncu 2025.1 or newer")
        return str(path)
    found = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu" if Path("/usr/local/cuda/bin/ncu").exists() else None)
    if not found:
        raise RecorderError("no ncu on PATH (or NCU_PATH): install Nsight Compute 2025.1 or newer")
    return found


def launch_mode_ncu_version(ncu: str) -> tuple[str, str]:
    """(version, the `ncu --version` text) of an ncu that launch mode can use (2025.1+), else a RecorderError."""
    text = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout
    version = parse_ncu_version(text)  # the notebook's parser
    if version is None:
        raise RecorderError(f"cannot read the version of {ncu}: {text.strip()!r}")
    if version[:2] < MIN_NCU:
        raise RecorderError(
            f"ncu {version_text(version)} is older than {'.'.join(map(str, MIN_NCU))}: launch mode needs 2025.1+"
        )
    return version_text(version), text.strip()


def folder_name(gpu: str, ncu_version: str) -> str:
    version = ncu_version.rsplit(".", 1)[0] if ncu_version.count(".") > 2 else ncu_version
    return f"{recordings.gpu_slug(gpu)}-ncu-{version}"


def query_metrics(ncu: str, families: list[str], bases: list[str], dest: Path, version: str):
    """The tu104 metric list (every family the notebook uses) and the valid suffixes of the notebook's base
    metrics."""
    listing = subprocess.run([ncu, "--query-metrics", "--chip", "tu104"], capture_output=True, text=True)
    lines = [line for line in listing.stdout.splitlines() if line.startswith(tuple(families))]
    header = f"# ncu {version}: `ncu --query-metrics --chip tu104`, lines of the families {', '.join(families)}\n"
    (dest / "tu104_metrics.txt").write_text(header + "\n".join(lines) + "\n")
    suffixes = subprocess.run(
        [ncu, "--query-metrics-mode", "suffix", "--chip", "tu104", "--metrics", ",".join(bases)],
        capture_output=True,
        text=True,
    )
    header = f"# ncu {version}: `ncu --query-metrics-mode suffix --chip tu104 --metrics {','.join(bases)}`\n"
    (dest / "tu104_metric_suffixes.txt").write_text(header + suffixes.stdout.strip() + "\n")
    return listing.returncode, suffixes.returncode, len(lines)


def section_cost(number: int, calls: list[dict], guard_runs: int, wall_s: float) -> dict:
    """What recording section `number` cost: its wall time, the ncu processes it started and their wall time."""
    run_here = [call for call in calls if call.get("section") == number and not call.get("served_from")]
    return {
        "wall_s": round(wall_s, 2),
        "ncu_processes": len(run_here) + guard_runs,
        "profiled_calls": len(run_here),
        "served_calls": sum(1 for call in calls if call.get("section") == number and call.get("served_from")),
        "ncu_wall_s": round(sum(call.get("ncu_wall_s") or 0 for call in run_here), 2),
        "session_s": round(sum(call.get("session_s") or 0 for call in run_here), 2),
    }


# ---------------------------------------------------------------- main
def keep_report_folders(out_dir: Path, dest: Path, sections: list[int]) -> list[str]:
    """Copy the report folders of the recorded sections from a run's output folder into the recording (reports
    xz-compressed: each embeds its kernels' cubins, megabytes of torch's)."""
    kept = []
    for name, number in REPORT_FOLDERS.items():
        source = Path(out_dir) / name
        if number not in sections or not source.is_dir():
            continue
        target = Path(dest) / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for path in sorted(source.iterdir()):
            if path.suffix == ".ncu-rep":
                (target / f"{path.name}.xz").write_bytes(lzma.compress(path.read_bytes(), preset=9))
            elif path.is_file():
                shutil.copy2(path, target / path.name)
        kept.append(name)
    return kept


def needed_reports(sections: list[int], dest_root: Path, work: Path) -> dict | None:
    """The recording whose values and reports stand in for the sections the recorded ones read but are not
    recorded with them (SECTION_DEPENDENCY), with those reports restored into the run's output folder; None when
    every section read is recorded in this run."""
    folder = recordings.dependency_recording(sections, dest_root, "ncu")
    if folder is None:
        return None
    recordings.restore_report_folders(folder, work / "out")
    for number in sections:
        for name in report_folders_of(number):
            shutil.rmtree(work / "out" / name, ignore_errors=True)  # its own: made again here
    log_line(f"[record] sections {recordings.missing_dependencies(sections)} (read by {sections}) from {folder}")
    return recordings.load_recording(folder)


def outer(dest_root: Path, sections: list[int], keep_work: bool) -> tuple[Path, dict]:
    recordings.require_cell_modules()  # before nsight or torch: what is missing is named, not a traceback
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
    commit = recordings.notebook_commit()
    started = time.perf_counter()
    with NcuGuard(ncu) as guard:
        done = replay(recordings.plan(cells, sections), calls, guard, recorded=recorded)
    total = time.perf_counter() - started
    namespace, runs, failed = done["namespace"], done["runs"], done["failed"]
    if None in failed:
        raise RecorderError(f"shared cell {failed[None]} failed; nothing was recorded (its traceback is above)")
    env = dict(namespace["ENVIRONMENT"])
    dest = dest_root / folder_name(env["gpu"], version)
    status = namespace.get("SECTIONS", {})
    recording = {
        "format": recordings.FORMAT,
        "what": "Nsight Compute frames of the notebook's sections, recorded in ncu launch mode by "
        "scripts/record_ncu.py: nsight-python's own profiling session ran under the ncu command line with the "
        "flags nsight's attach command passes; nsight's own extraction and aggregation built the frames.",
        "mode": "ncu",
        "created_utc": created,
        "provenance": {
            "gpu": env["gpu"],
            "driver": env["driver"],
            "ncu_version": version,
            "ncu_version_text": ncu_says,
            "ncu_path": ncu,
            "nsight_python": nsight.__version__,
            "ncu_report": recordings.importlib_version("ncu-report"),
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "pandas": pd.__version__,
            "python": sys.version.split()[0],
            "host": socket.gethostname(),
            "notebook_commit": commit,
            "notebook_sha256": recordings.notebook_sha256(),
        },  # fmt: skip
        "environment": encode(env),
        "define_values": {
            name: encode(namespace[name])
            for name in sorted(recordings.benchmark_setting_names(cells, sections))
            if isinstance(namespace.get(name), (int, float, str, list, tuple))
        },
        "sections": {},
        "cells": recordings.recorded_cells(runs, commit, created),
        "calls": calls.calls,
        "figures": encode([figure for figure in namespace.get("FIGURES", []) if figure["section"] in sections]),
    }
    for number in sections:
        cost = section_cost(number, calls.calls, done["ncu_runs"].get(number, 0), done["wall_s"].get(number, 0.0))
        recording["sections"][str(number)] = recordings.section_entry(number, status, failed, cost, commit, created)
    path = recordings.write_recording(dest, recording, sections)
    kept = keep_report_folders(work / "out", dest, sections)
    bases = sorted({metric.split(".", 1)[0] for metric in notebook_metrics(cells)})
    queried = query_metrics(ncu, metric_families(cells), bases, dest, version)
    log_line(f"[record] query-metrics: {queried}; report folders kept: {kept}")
    log_line(f"[record] wrote {path} in {total:.1f} s")
    for number in sections:
        info = recording["sections"][str(number)]
        log_line(f"[record] section {number}: {info['status']} {info['reason']} cost {json.dumps(info['cost'])}")
    if not keep_work:
        shutil.rmtree(work / "calls", ignore_errors=True)
    return dest, failed


def inner(work: Path, key: str) -> int:
    check_nsight_internals()
    section = int(key.split("-")[0])
    calls = ProfiledCalls(work, "inner", target=key)
    try:
        replay(inner_plan(load_cells(), section), calls, log=lambda *_: None)
    except InnerDone:
        return 0
    print(f"[record inner] section {section}'s cells ended before profiled call {key}", file=sys.stderr)
    return 3


def print_plan(sections: list[int]) -> None:
    cells = load_cells()
    for section, cell_id, role in recordings.plan(cells, sections):
        under = "" if role not in ("run",) or cell_id in NOT_UNDER_NCU else ", each profiled call under its own ncu"
        print(f"section {section or '-'}: {cell_id} ({role}{under})")
    for number in recordings.missing_dependencies(sections):
        print(f"section {number}: read by {[n for n in sections if number in SECTION_DEPENDENCY.get(n, ())]}, "
              "taken from the recording in docs/verified (values and reports), not recorded again")  # fmt: skip
    print("metrics in the notebook:", ", ".join(notebook_metrics(cells)))
    print("metric families in the tu104 listing:", ", ".join(metric_families(cells)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "docs" / "verified", help="folder for the recording")
    parser.add_argument("--sections", help=f"which sections to record, e.g. 2,3,9 or 2-5 (default: {SECTIONS})")
    parser.add_argument("--plan", action="store_true", help="print the cells it would run and the metrics; no GPU")
    parser.add_argument("--keep-work", action="store_true", help="keep the scratch pickles between processes")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--call", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # before nsight is imported: ncu launches this process instead
    if args.inner:
        return inner(args.work, args.call)
    try:
        sections = recorder_input.parse_sections(args.sections, SECTIONS)
        if args.plan:
            print_plan(sections)
            return 0
        recorder_input.check_scratch_folder("record_ncu_work")  # refused before the GPU checks
        dest, failed = outer(args.dest, sections, args.keep_work)
    except RecorderError as error:
        print(f"record_ncu: {error}", file=sys.stderr)
        return 2
    if failed:
        print(f"record_ncu: sections failed: {failed} (cell ids); the rest is recorded in {dest}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
