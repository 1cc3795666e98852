#!/usr/bin/env python3
"""Record the notebook's sections 2 to 10 under Nsight Compute on a GPU machine, in launch mode.

    python3 scripts/record_ncu.py [--sections 2,3,5] [--plan] [--keep-work]

Launch mode because nsight-python 1.1.0 attaches only to ncu 2026.2.1+ and the runner has 2025.3.1: each profiled
call runs `ncu <nsight's flags, --clock-control none> python3 scripts/ncu_inner.py --work W --call N-k` (ncu_launch.py).
Writes docs/verified/<gpu>-ncu-<version>/; exit 2 unless every recorded section is ok.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import recorder_input
import recordings
from ncu_launch import NcuGuard, ProfiledCalls, check_nsight_internals, child_env, replay
from recordings import ROOT, RecorderError, encode, load_cells, log_line

from plumbing.cells import NOT_UNDER_NCU, REPORT_FOLDERS, SECTION_DEPENDENCY, SECTION_PLAN, report_folders_of
from plumbing.setup_helpers import parse_ncu_version, version_text

MIN_NCU = (2025, 1)
SECTIONS = tuple(number for number in SECTION_PLAN)  # 2 to 10: every section that profiles or reads a report
METRIC_NAME = re.compile(r"^[a-z0-9]+__[a-z0-9_]+(\.[a-z0-9_]+)+$")
DEFAULT_METRIC = "gpu__time_duration.sum"  # nsight.analyze.kernel's default metrics
METRIC_FAMILY = re.compile(r"(?<![A-Za-z0-9_])([a-z0-9]+)__[a-z]")  # lts__t_bytes.sum -> lts


def _code_strings(cells: list[dict]):
    """Every string constant in the notebook's code cells (an f-string's literal parts too)."""
    import ast

    for cell in (cell for cell in cells if cell["type"] == "code"):
        try:
            nodes = list(ast.walk(ast.parse(cell["source"])))
        except SyntaxError:
            continue
        yield from (node.value for node in nodes if isinstance(node, ast.Constant) and isinstance(node.value, str))


def notebook_metrics(cells: list[dict]) -> list[str]:
    """Every Nsight Compute metric name written in the notebook's code cells, plus nsight's default one."""
    return sorted({DEFAULT_METRIC} | {text for text in _code_strings(cells) if METRIC_NAME.match(text)})


def metric_families(cells: list[dict]) -> list[str]:
    """The metric families (`lts__`, `launch__`, `smsp__`, ...) of every metric name the notebook writes."""
    found = {DEFAULT_METRIC.split("__", 1)[0]}
    for text in _code_strings(cells):
        found |= set(METRIC_FAMILY.findall(text))
    return sorted(f"{family}__" for family in found)


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
    """(version, `ncu --version` text) of an ncu launch mode can use (2025.1+), else a RecorderError."""
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
    return f"{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}-ncu-{version}"  # NVIDIA H200 -> nvidia-h200


def query_metrics(ncu: str, families: list[str], bases: list[str], dest: Path, version: str):
    """The tu104 metric list (the notebook's families) and the suffixes of the notebook's base metrics."""
    listing = subprocess.run([ncu, "--query-metrics", "--chip", "tu104"], capture_output=True, text=True)
    lines = [line for line in listing.stdout.splitlines() if line.startswith(tuple(families))]
    header = f"# ncu {version}: `ncu --query-metrics --chip tu104`, lines of the families {', '.join(families)}\n"
    (dest / "tu104_metrics.txt").write_text(header + "\n".join(lines) + "\n")
    query = [ncu, "--query-metrics-mode", "suffix", "--chip", "tu104", "--metrics", ",".join(bases)]
    suffixes = subprocess.run(query, capture_output=True, text=True)
    header = f"# ncu {version}: `ncu --query-metrics-mode suffix --chip tu104 --metrics {','.join(bases)}`\n"
    (dest / "tu104_metric_suffixes.txt").write_text(header + suffixes.stdout.strip() + "\n")
    return listing.returncode, suffixes.returncode, len(lines)


def section_cost(number: int, calls: list[dict], guard_runs: int, wall_s: float) -> dict:
    """What recording section `number` cost: its wall time, the ncu processes it started and their wall time."""
    run_here = [call for call in calls if call.get("section") == number and not call.get("served_from")]
    return {
        "wall_s": round(wall_s, 2), "ncu_processes": len(run_here) + guard_runs, "profiled_calls": len(run_here),
        "served_calls": sum(1 for call in calls if call.get("section") == number and call.get("served_from")),
        "ncu_wall_s": round(sum(call.get("ncu_wall_s") or 0 for call in run_here), 2),
        "session_s": round(sum(call.get("session_s") or 0 for call in run_here), 2),
    }  # fmt: skip


WHAT = (
    "Nsight Compute frames of the notebook's sections, recorded in ncu launch mode by scripts/record_ncu.py: "
    "nsight-python's own profiling session ran under the ncu command line with the flags nsight's attach command "
    "passes; nsight's own extraction and aggregation built the frames."
)


def keep_report_folders(out_dir: Path, dest: Path, sections: list[int]) -> list[str]:
    """The recorded sections' report folders into the recording (reports xz-compressed: they embed torch's cubins)."""
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
    """The newest recording holding the sections these read but are not recorded with them, its reports restored
    into the run's output folder; None when there are none."""
    missing = recordings.missing_dependencies(sections)
    if not missing:
        return None
    usable = [folder for folder in recordings.recording_folders(dest_root)
              if all(str(dep) in recordings.load_recording(folder)["sections"] for dep in missing)]  # fmt: skip
    if not usable:
        raise RecorderError(
            f"sections {sections} read sections {missing}, and no recording in {dest_root} holds them: record them "
            f"together (--sections {','.join(map(str, sorted({*sections, *missing})))})"
        )
    recordings.restore_report_folders(usable[-1], work / "out")
    for number in sections:
        for name in report_folders_of(number):
            shutil.rmtree(work / "out" / name, ignore_errors=True)  # its own: made again here
    log_line(f"[record] sections {missing} (read by {sections}) from {usable[-1]}")
    return recordings.load_recording(usable[-1])


def importlib_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def outer(dest_root: Path, sections: list[int], keep_work: bool) -> tuple[Path, dict]:
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
    commit = recordings.notebook_commit()
    started = time.perf_counter()
    with NcuGuard(ncu) as guard:
        done = replay(recordings.plan(cells, sections), calls, guard, recorded=recorded)
    total = time.perf_counter() - started
    namespace, failed = done["namespace"], done["failed"]
    if None in failed:
        raise RecorderError(f"shared cell {failed[None]} failed; nothing was recorded (its traceback is above)")
    dest = dest_root / folder_name(namespace["ENVIRONMENT"]["gpu"], version)
    provenance = {
        "ncu_version": version, "ncu_version_text": ncu_says, "ncu_path": ncu, "nsight_python": nsight.__version__,
        "ncu_report": importlib_version("ncu-report"), "torch": torch.__version__,
        "torch_cuda": torch.version.cuda, "pandas": pd.__version__, "python": sys.version.split()[0],
    }  # fmt: skip

    def cost(number):
        return section_cost(number, calls.calls, done["ncu_runs"].get(number, 0), done["wall_s"].get(number, 0.0))

    recording = recordings.new_recording(WHAT, provenance, namespace, done, sections, commit, created, cost)
    recording["define_values"] = {
        name: encode(namespace[name])
        for name in sorted(recordings.benchmark_setting_names(cells, sections))
        if isinstance(namespace.get(name), (int, float, str, list, tuple))
    }
    recording["calls"] = calls.calls
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
    args = parser.parse_args(argv)
    os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # before nsight is imported: ncu profiles from outside
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
