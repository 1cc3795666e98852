#!/usr/bin/env python3
"""Record the Nsight Compute half of the notebook (sections 4, 6, 7, 9 and 10) on a GPU machine, in launch mode.

    python3 scripts/record_ncu.py                 # on a GPU machine with ncu 2025.1+ on PATH (or NCU_PATH)
    python3 scripts/record_ncu.py --plan          # anywhere: print which notebook cells it would run

Why launch mode: nsight-python 1.1.0 attaches ncu 2026.2.1+ to the running process. Where only an older ncu
exists (the project's GPU runner has 2025.3.1), nsight's own profiling session can still run as a script under the
ncu command line, with the flags of nsight's own attach command (built by nsight, minus --mode attach and
--process-id, plus --nvtx), always with `--clock-control none` (the runner is shared and its clocks stay as they
are; see RUNNER_CLOCK_CONTROL):

    ncu --nvtx --nvtx-include regex:nsight-python@.+ --log-file LOG --cache-control <all|none>
        --clock-control none --replay-mode <kernel|range> --metrics <list> -f -o REPORT python3 ...

How (one ncu process per profiled call): this script (the outer process) executes the notebook's own cells, by
cell id, in a namespace where `nsight` was imported with NSPY_NCU_INIT_AT_IMPORT=0 and section 1's names were made
with the notebook's own plumbing (plumbing/harness.py, plumbing/setup_helpers.py). nsight's NCUCollector.collect
runs unchanged; the module-level functions it calls are patched (PATCHED_FUNCTIONS): activating Nsight Compute and
begin/end profiling do nothing (ncu launched the process), launch_ncu starts `ncu ... python3 record_ncu.py --inner
--call k` with nsight's own flags, and run_profile_session is left to that inner process. The inner replays the same
cells, serves calls 0..k-1 from what the outer already extracted, and for call k runs nsight's own
run_profile_session, then exits. collect then waits for ncu and reads the report with nsight's own
extract_df_from_report and aggregation. So the notebook's variables (doubling_frames, limits_frame, fusion_frame,
ncu_matmul_frame, ...) end up holding exactly what to_dataframe() built from real reports. A release of
nsight-python whose collect no longer calls these functions, or calls them with other parameters, stops the
recorder with a message naming what moved (check_nsight_internals).

Output, in docs/verified/<gpu>-ncu-<version>/ (or --dest):
  recording.json                 provenance, every call (settings, ncu wall time, raw frame), the notebook's
                                 variables (frames with dtypes), each executed cell's stdout
  s7_fusion/                     what section 7's call left in its folder (report as .ncu-rep.xz), for s10
  s10_sections/                  s10-profile's ncu report (SpeedOfLight, LaunchStats, Occupancy) of the fused kernel
  tu104_metrics.txt              `ncu --query-metrics --chip tu104` lines of the metric families the notebook uses
  tu104_metric_suffixes.txt      `ncu --query-metrics-mode suffix --chip tu104` for the notebook's base metrics
  record_ncu.log                 what this script printed (when run with tee)
Nothing of the benchmarks lives here: change a benchmark in the notebook and the next recording follows it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import hashlib
import io
import json
import linecache
import lzma
import math
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the plumbing package, the same modules the notebook embeds
from plumbing.cells import SECTION_ONE_NAMES, section_of  # noqa: E402
from plumbing.setup_helpers import parse_ncu_version, put_first_on_path, version_text  # noqa: E402

NOTEBOOK = ROOT / "nsight_python_t4_tutorial.ipynb"
NSIGHT_VERSION = "1.1.0"
MIN_NCU = (2025, 1)

# The notebook's cells, by id (plumbing/cells.py says which section each belongs to). Section 1's names are made
# here the way section 1 makes them (see section_one_names); the harness and the helpers come from the notebook.
PRELUDE_CELLS = ("harness", "setup-helpers")
# The cells that define these run first: later sections' define, run and analysis cells use them.
PRELUDE_NAMES = ("add_kernels", "profile_each", "SWEEP_SIZES", "run_started_s", "pivot_in_base_units")
SECTIONS = {
    4: {"define": ("s4-define",), "run": ("s4-run",), "names": ("doubling_frames",)},
    6: {"define": ("s6-define",), "run": ("s6-run",), "names": ("limits_frame",)},
    7: {"define": ("s7-define",), "run": ("s7-error", "s7-run", "s7-run-unflushed"),
        "names": ("several_kernels_error", "fusion_frame", "unflushed_fusion_frame")},
    9: {"define": ("s9-child", "s9-define"), "run": ("s9-cupti", "s9-ncu", "s9-run-unflushed"),
        "names": ("cupti_result", "ncu_matmul_frame", "ncu_wall_s", "unflushed_smallest_frame")},
    10: {"define": ("s10-define",), "run": ("s10-profile",), "names": ()},
}  # fmt: skip
# Every other code cell of these sections (id s<N>-..., after the folded opener s<N>-open) only reads what the
# define and run cells made: those are the analysis cells that the tests and the rendered page execute on CPU.
OUTER_ONLY_CELLS = ("s9-cupti",)  # never replayed under ncu: its CUPTI child must not be profiled by ncu
FUSION_REPORT_FOLDER = "s7_fusion"  # out_prefix("s7_fusion"): section 10 opens the report found there
SECTIONS_REPORT_FOLDER = "s10_sections"  # out_prefix("s10_sections"): s10-profile's ncu report with sections
REPORT_FOLDERS = (FUSION_REPORT_FOLDER, SECTIONS_REPORT_FOLDER)  # kept in the recording for section 10
METRIC_NAME = re.compile(r"^[a-z0-9]+__[a-z0-9_]+(\.[a-z0-9_]+)+$")
DEFAULT_METRIC = "gpu__time_duration.sum"  # nsight.analyze.kernel's default metrics
# The GPU runner is shared: its clocks must stay as they are, so every ncu there gets `--clock-control none`.
# A call that asks for another clock control (section 4's clock_control="base") is never run here: it is served
# from a committed recording that already holds it (made before this rule), and labelled with that recording.
RUNNER_CLOCK_CONTROL = "none"

NCU_CALL_TIMEOUT_S = 300  # one profiled call under ncu, replay of the cells before it included


class RecorderError(RuntimeError):
    """Something the recorder cannot work around; the message says what to do."""


# ---------------------------------------------------------------- the notebook's cells
def load_cells(path: Path = NOTEBOOK) -> list[dict]:
    notebook = json.loads(path.read_text())
    return [
        {"id": cell.get("id"), "type": cell["cell_type"], "source": "".join(cell["source"])}
        for cell in notebook["cells"]
    ]


def cell_source(cells: list[dict], cell_id: str) -> str:
    for cell in cells:
        if cell["id"] == cell_id:
            if cell["type"] != "code":
                raise RecorderError(f"notebook cell {cell_id!r} is {cell['type']}, not code")
            return cell["source"]
    raise RecorderError(
        f"the notebook has no code cell with id {cell_id!r}; scripts/record_ncu.py runs the notebook's cells by id "
        "(plumbing/cells.py). Update SECTIONS/PRELUDE_CELLS there if the notebook's cell ids changed."
    )


def section_cells(cells: list[dict], number: int) -> list[dict]:
    """The cells of section `number` (plumbing/cells.py), in notebook order."""
    return [cell for cell in cells if section_of(cell["id"]) == number]


def opener_id(number: int) -> str:
    """The folded cell that opens section `number` (begin_section)."""
    return f"s{number}-open"


def analysis_cell_ids(cells: list[dict], number: int, spec: dict | None = None) -> list[str]:
    """Section `number`'s code cells other than its opener, define and run cells (spec: SECTIONS[number])."""
    spec = spec or SECTIONS[number]
    skip = {opener_id(number), *spec["define"], *spec["run"]}
    return [cell["id"] for cell in section_cells(cells, number) if cell["type"] == "code" and cell["id"] not in skip]


def top_level_names(source: str) -> set[str]:
    """Names a cell binds at top level (def, class, assignment, import)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def prelude_cell_ids(cells: list[dict]) -> list[str]:
    """The harness cells, then, in notebook order, the cells that define PRELUDE_NAMES."""
    ids = list(PRELUDE_CELLS)
    missing = set(PRELUDE_NAMES)
    for cell in cells:
        if cell["type"] != "code" or cell["id"] in ids:
            continue
        defined = top_level_names(cell["source"]) & set(PRELUDE_NAMES)
        if defined:
            ids.append(cell["id"])
            missing -= defined
    if missing:
        raise RecorderError(f"no notebook cell defines {sorted(missing)} (needed by sections 4-9)")
    return ids


def benchmark_setting_names(cells: list[dict]) -> set[str]:
    """Names the sections' visible define cells bind: the benchmark settings a recording must match.

    The folded define cells (section 9's CUPTI child) are plumbing, not settings.
    """
    names = set()
    for spec in SECTIONS.values():
        for cell_id in spec["define"]:
            source = cell_source(cells, cell_id)
            if not source.lstrip().startswith("# @title"):
                names |= top_level_names(source)
    return names


def plan(cells: list[dict]) -> list[tuple[int | None, str]]:
    """(section, cell id) in the order the recorder executes them."""
    steps = [(None, cell_id) for cell_id in prelude_cell_ids(cells)]
    for number, spec in SECTIONS.items():
        steps += [(number, cell_id) for cell_id in (*spec["define"], *spec["run"])]
    for _, cell_id in steps:
        cell_source(cells, cell_id)  # every id must exist
    return steps


def notebook_metrics(cells: list[dict]) -> list[str]:
    """Every Nsight Compute metric name written in the notebook's code cells, plus nsight's default one."""
    found = {DEFAULT_METRIC}
    for cell in cells:
        if cell["type"] != "code":
            continue
        try:
            tree = ast.parse(cell["source"])
        except SyntaxError:
            continue
        found |= {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and METRIC_NAME.match(node.value)
        }
    return sorted(found)


# ---------------------------------------------------------------- values <-> JSON (no pickles in the repository)
def encode(value):
    """JSON for frames (with dtypes and a named index), series, dicts with any keys, tuples, numpy scalars."""
    import numpy as np
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        columns = [str(column) for column in value.columns]
        data = {str(column): [encode(item) for item in value[column].tolist()] for column in value.columns}
        dtypes = {str(column): str(dtype) for column, dtype in value.dtypes.items()}
        spec = {"columns": columns, "dtypes": dtypes, "data": data}
        if not isinstance(value.index, pd.RangeIndex) or value.index.name or value.columns.name:
            spec.update(
                index=encode(value.index.tolist()), index_name=value.index.name, columns_name=value.columns.name
            )
        return {"__frame__": spec}
    if isinstance(value, pd.Series):
        return {"__series__": {"name": encode(value.name), "index": encode(value.index.tolist()),
                               "values": encode(value.tolist()), "dtype": str(value.dtype)}}  # fmt: skip
    if isinstance(value, dict):
        return {"__dict__": [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(item) for item in value]}
    if isinstance(value, list):
        return [encode(item) for item in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None  # JSON has no NaN or infinity
    if isinstance(value, (str, Path)):
        return str(value)
    return {"__repr__": repr(value)}


def decode(value):
    import pandas as pd

    if isinstance(value, list):
        return [decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "__frame__" in value:
        spec = value["__frame__"]
        frame = pd.DataFrame({column: spec["data"][column] for column in spec["columns"]}, columns=spec["columns"])
        for column, dtype in spec["dtypes"].items():
            if dtype == "object":
                frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
            else:
                frame[column] = frame[column].astype(dtype)
        if "index" in spec:
            frame.index = pd.Index(decode(spec["index"]), name=spec["index_name"])
            frame.columns.name = spec["columns_name"]
        return frame
    if "__series__" in value:
        spec = value["__series__"]
        series = pd.Series(decode(spec["values"]), index=decode(spec["index"]), name=decode(spec["name"]))
        return series if spec["dtype"] == "object" else series.astype(spec["dtype"])
    if "__dict__" in value:
        return {_hashable(decode(key)): decode(item) for key, item in value["__dict__"]}
    if "__tuple__" in value:
        return tuple(decode(item) for item in value["__tuple__"])
    if "__repr__" in value:
        return value["__repr__"]
    return {key: decode(item) for key, item in value.items()}


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key


def load_recording(folder: Path) -> dict:
    """recording.json of a recording folder, with the notebook's variables and environment decoded."""
    recording = json.loads((Path(folder) / "recording.json").read_text())
    recording["variables"] = {name: decode(value) for name, value in recording["variables"].items()}
    recording["environment"] = decode(recording["environment"])
    return recording


def cpu_section_one_source(
    folder: Path | str, scripts: Path | str = ROOT / "scripts", loader: str = "record_ncu.load_recording"
) -> str:
    """A folded cell for a kernel that ran the harness: section 1's names, from a recording, without a GPU.

    Used by the tests and scripts/render_recorded.py (which passes paths relative to the repository). `loader`
    reads the recording: this script's (Nsight Compute) or record_cupti.py's. No torch: the define cells name it
    only inside benchmark bodies, which never run here; the recorded frames stand in for the profiled calls.
    """
    module, function = loader.split(".")
    return f"""# @title Section 1's names, from the recording in {Path(folder).name} (no GPU in this process)
import os
import sys

os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # nothing to load: the frames were recorded on the GPU machine
sys.path.insert(0, {json.dumps(str(scripts))})
import matplotlib.pyplot as plt
import nsight
import numpy as np
import {module} as _recorder
from IPython.display import Image, display

RECORDING = _recorder.{function}({json.dumps(str(folder))})
ENVIRONMENT.update(RECORDING["environment"])
USE_NCU = ENVIRONMENT["profiler"].startswith("ncu")
CUPTI_REASON = "" if USE_NCU else ENVIRONMENT["cupti_reason"]
L2_BYTES, PEAKS_LABEL, PEAKS, NCU_ONLY_SKIP = section_one_values(ENVIRONMENT, USE_NCU)
QUIET = nsight.VerbosityLevel.SILENT
CUPTI_DIR = Path("/nonexistent-cupti-dir")  # no CUPTI child runs here: section 9's CUPTI side is recorded
"""


def inject_source(number: int) -> str:
    """A folded cell that sets section `number`'s recorded variables (after cpu_section_one_source ran)."""
    names = json.dumps(list(SECTIONS[number]["names"]))
    return (
        f"# @title Section {number}: the variables its profiled calls produced on the GPU machine (recorded)\n"
        f"_names = {names}\n"
        '_missing = [name for name in _names if name not in RECORDING["variables"]]\n'
        "if _missing:\n"
        "    raise RuntimeError(\n"
        '        f"the recording predates these cells: it has no {_missing}. Re-record with scripts/record_ncu.py "\n'
        '        "on the GPU machine, then run scripts/render_recorded.py"\n'
        "    )\n"
        'globals().update({name: RECORDING["variables"][name] for name in _names})\n'
    )


def restore_fusion_report(folder: Path, out_dir: Path) -> list[Path]:
    """Put the recorded report folders (reports decompressed) where out_prefix(<folder name>) points.

    Section 7's folder (its report and log) and, in recordings made since section 10 profiles with sections, the
    folder of s10-profile's report. A recording made before that has only the first: section 10 then fails with
    'no .ncu-rep', and the tests say to re-record.
    """
    written = []
    for name in REPORT_FOLDERS:
        if not (Path(folder) / name).is_dir():
            continue
        target = Path(out_dir) / name
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted((Path(folder) / name).iterdir()):
            if path.suffix == ".xz":
                written.append(target / path.stem)
                written[-1].write_bytes(lzma.decompress(path.read_bytes()))
            else:
                written.append(target / path.name)
                shutil.copy2(path, written[-1])
    return written


def recording_folders(root: Path = ROOT) -> list[Path]:
    return sorted(path.parent for path in (root / "docs" / "verified").glob("*/recording.json"))


# ---------------------------------------------------------------- what the recorder patches in nsight
# NCUCollector.collect runs unchanged; the recorder replaces the module-level functions it calls. Each entry: the
# module, the function, and the parameters the replacement relies on (None: called without arguments that matter).
PATCHED_FUNCTIONS = (
    ("nsight.tools_manager", "activate", ["tool"]),
    ("nsight.collection.ncu", "begin_profiling", []),
    ("nsight.collection.ncu", "end_profiling", []),
    ("nsight.collection.ncu", "launch_ncu",
     ["report_path", "metrics", "cache_control", "clock_control", "replay_mode", "verbosity"]),
    ("nsight.collection.core", "run_profile_session",
     ["func", "configs", "runs", "verbosity", "thermal_mode", "thermal_wait", "thermal_cont", "thermal_timeout",
      "thermal_device", "info_collectors_list", "output_prefix"]),
    ("nsight.extraction", "extract_df_from_report",
     ["report_path", "metrics", "configs", "iterations", "func", "derive_metric", "ignore_kernel_list", "verbosity",
      "combine_kernel_metrics", "info_collectors_list", "config_scope_columns", "annotation_scope_columns",
      "info_prefix"]),
)  # fmt: skip
# The names NCUCollector.collect must still use for the patches to take effect (its code object's names).
COLLECT_USES = ("launch_ncu", "begin_profiling", "end_profiling", "run_profile_session", "extract_df_from_report")
COLLECT_IMPORTS = ("activate", "get_active_tool")  # imported inside collect from nsight.tools_manager
ATTACH_ONLY_OPTIONS = {"--mode": "attach", "--process-id": None}  # dropped: in launch mode ncu starts the process


def nsight_internals_problems() -> list[str]:
    """What moved in the installed nsight-python, against what the recorder patches ([] if nothing)."""
    import importlib
    import inspect

    from nsight.collection import ncu

    problems = []
    for module_name, name, parameters in PATCHED_FUNCTIONS:
        function = getattr(importlib.import_module(module_name), name, None)
        if function is None:
            problems.append(f"{module_name}.{name} is gone")
        elif list(inspect.signature(function).parameters)[: len(parameters)] != parameters:
            problems.append(
                f"{module_name}.{name} takes ({', '.join(inspect.signature(function).parameters)}), "
                f"the recorder expects ({', '.join(parameters)})"
            )
    collect = getattr(getattr(ncu, "NCUCollector", None), "collect", None)
    if collect is None:
        return [*problems, "nsight.collection.ncu.NCUCollector.collect is gone"]
    code = collect.__code__
    problems += [f"NCUCollector.collect no longer calls {name}" for name in COLLECT_USES if name not in code.co_names]
    problems += [
        f"NCUCollector.collect no longer imports {name} from nsight.tools_manager"
        for name in COLLECT_IMPORTS
        if name not in code.co_varnames + code.co_names
    ]
    return problems


def check_nsight_internals():
    """Fail with what moved unless nsight-python still has the functions the recorder patches, as it calls them."""
    import nsight

    problems = nsight_internals_problems()
    if problems:
        raise RecorderError(
            f"scripts/record_ncu.py patches functions that NCUCollector.collect calls, and nsight-python "
            f"{nsight.__version__} moved them: " + "; ".join(problems) + ". Port PATCHED_FUNCTIONS and ProfiledCalls "
            f"to this release, or install nsight-python=={NSIGHT_VERSION} (the release it was written for)."
        )
    if nsight.__version__ != NSIGHT_VERSION:
        log_line(
            f"[record] nsight-python {nsight.__version__} (written for {NSIGHT_VERSION}): nothing it patches moved"
        )


def nsight_attach_command(launch_ncu, report_path, metrics, cache_control, clock_control, replay_mode, verbosity):
    """The ncu command nsight's own launch_ncu builds for attach mode, captured instead of started."""
    from nsight.collection import ncu

    captured = []

    class Capture:
        @staticmethod
        def Popen(command, *args, **kwargs):  # noqa: N802 - stands in for subprocess.Popen
            captured.append(list(command))

    saved, ncu.subprocess = ncu.subprocess, Capture
    try:
        _, report_path, log_path = launch_ncu(
            report_path, metrics, cache_control, clock_control, replay_mode, verbosity
        )
    finally:
        ncu.subprocess = saved
    if len(captured) != 1:
        raise RecorderError(f"nsight's launch_ncu started {len(captured)} processes, the recorder expects one")
    return captured[0], log_path


def launch_command(attach: list[str], ncu: str, program: list[str]) -> list[str]:
    """nsight's attach command as a launch command: its flags, minus the attach-only ones, plus --nvtx (launch mode
    filters NVTX ranges only with it), running `program` under the given ncu."""
    flags = list(attach[1:])
    for option, value in ATTACH_ONLY_OPTIONS.items():
        if option not in flags or (value is not None and flags[flags.index(option) + 1] != value):
            raise RecorderError(f"nsight's ncu command has no '{option} {value or '...'}': {' '.join(attach)}")
        at = flags.index(option)
        del flags[at : at + 2]
    if "--clock-control" not in flags or flags[flags.index("--clock-control") + 1] != RUNNER_CLOCK_CONTROL:
        raise RecorderError(f"refusing to start ncu without --clock-control {RUNNER_CLOCK_CONTROL}: {' '.join(attach)}")
    return [ncu, "--nvtx", *flags, *program]


def inner_program(work: Path, index: int) -> list[str]:
    """What ncu runs for profiled call `index`: this script, replaying the cells up to that call."""
    return [sys.executable, str(Path(__file__).resolve()), "--inner", "--work", str(work), "--call", str(index)]


class InnerDone(BaseException):
    """The inner process profiled its call: stop replaying cells."""


class NcuRun:
    """What collect waits on: the ncu process running the inner replay (outer), or nothing (inner)."""

    def __init__(self, calls: ProfiledCalls, call: dict | None = None, process=None, output: Path | None = None):
        self.calls, self.call, self.process, self.output = calls, call, process, output

    def wait(self) -> int:
        if self.process is None:
            return 0
        return self.calls.finished(self.call, self.process, self.output)


class ProfiledCalls:
    """The replacements for the functions NCUCollector.collect calls, in the outer process or in an inner one.

    Outer: launch_ncu starts `ncu <nsight's own flags> python3 record_ncu.py --inner --call k`; the profile session
    is left to that inner process; nsight's own extraction then reads the report. Inner (under ncu): calls before k
    return what the outer extracted; call k runs nsight's own profile session, then the process ends.
    """

    def __init__(self, work: Path, role: str, target: int | None = None, ncu: str | None = None, log=None):
        self.work, self.role, self.target, self.ncu = work, role, target, ncu
        self.log = log or log_line
        self.index = -1  # the call collect is in
        self.where = (None, None)  # (section, cell id) being executed
        self.calls: list[dict] = []  # outer: what each call did
        self.allowed = True
        self.original: dict[str, object] = {}

    def install(self):
        import importlib

        from nsight.collection import ncu

        if ncu.injection_load_error is not None:
            raise RecorderError(
                f"nsight tried to load Nsight Compute when it was imported ({ncu.injection_load_error}); the recorder "
                "needs NSPY_NCU_INIT_AT_IMPORT=0 before nsight is imported (main() sets it)"
            )

        replacements = {
            "activate": self.activate,
            "begin_profiling": self.no_injection,
            "end_profiling": self.no_injection,
            "launch_ncu": self.launch_ncu,
            "run_profile_session": self.run_profile_session,
            "extract_df_from_report": self.extract_df_from_report,
        }
        for module_name, name, _ in PATCHED_FUNCTIONS:
            module = importlib.import_module(module_name)
            self.original[name] = getattr(module, name)
            setattr(module, name, replacements[name])

    def uninstall(self):
        import importlib

        for module_name, name, _ in PATCHED_FUNCTIONS:
            if name in self.original:
                setattr(importlib.import_module(module_name), name, self.original.pop(name))

    def _stored(self, index: int) -> Path:
        return self.work / "calls" / f"{index}.pkl"  # scratch between outer and inner, never committed

    # ---- the replacements
    def activate(self, tool):
        from nsight.tools_manager import Tool

        if tool != Tool.NCU:
            return self.original["activate"](tool)
        return None  # ncu launched this process: there is no injection library to load

    def no_injection(self):
        """begin/end profiling: in launch mode ncu profiles the NVTX ranges nsight opens; nothing to call."""

    def launch_ncu(self, report_path, metrics, cache_control, clock_control, replay_mode, verbosity):
        if not self.allowed:
            raise RecorderError(f"cell {self.where[1]!r} called a benchmark, but it is run only for its definitions")
        self.index += 1
        index = self.index
        attach, log_path = nsight_attach_command(
            self.original["launch_ncu"], report_path, metrics, cache_control, clock_control, replay_mode, verbosity
        )
        if self.role == "inner":
            return NcuRun(self), report_path, log_path
        if clock_control != RUNNER_CLOCK_CONTROL:  # never run here: served from a committed recording
            call = {"index": index, "section": self.where[0], "cell": self.where[1], "serve": True}
            self.calls.append({**call, "cache_control": cache_control, "clock_control": clock_control})
            return NcuRun(self), report_path, log_path
        command = launch_command(attach, self.ncu, inner_program(self.work, index))
        call = {
            "index": index,
            "section": self.where[0],
            "cell": self.where[1],
            "metrics": list(metrics),
            "cache_control": cache_control,
            "clock_control": clock_control,
            "replay_mode": replay_mode,
            "report": os.path.relpath(report_path, self.work),
            "command": " ".join(command).replace(str(self.work), "WORK"),
            "nsight_attach_command": " ".join(attach).replace(str(self.work), "WORK"),
        }
        self.calls.append(call)
        output = self.work / "calls" / f"{index}.out"
        with open(output, "w") as sink:
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=child_env(self.work))
        call["started"] = time.perf_counter()
        return NcuRun(self, call, process, output), report_path, log_path

    def run_profile_session(self, func, configs, runs, *args, **kwargs):
        if self.role == "outer":  # the inner process runs it, under ncu
            plain = [tuple(c) if isinstance(c, (list, tuple)) else c for c in configs]
            self.calls[-1].update(benchmark=func.__name__, runs=runs, configs=encode(plain))
            if self.calls[-1].get("serve"):
                return None
            settings = f"{self.calls[-1]['cache_control']}/{self.calls[-1]['clock_control']} runs={runs}"
            self.log(f"[record] call {self.index}: section {self.where[0]} {func.__name__} {settings} "
                     f"configs={len(configs)} metrics={self.calls[-1]['metrics']}")  # fmt: skip
            return None
        if self.index < self.target:
            return None  # served from the outer's extraction below
        started = time.perf_counter()
        self.original["run_profile_session"](func, configs, runs, *args, **kwargs)
        import torch

        torch.cuda.synchronize()
        session = {"session_s": time.perf_counter() - started}
        (self.work / "calls" / f"{self.index}.session.json").write_text(json.dumps(session))
        raise InnerDone()

    def finished(self, call: dict, process, output: Path) -> int:
        """The outer's wait for ncu: its exit, wall time, the inner's session time and the ends of both logs."""
        returncode = process.wait(timeout=NCU_CALL_TIMEOUT_S)
        call["ncu_wall_s"] = round(time.perf_counter() - call.pop("started"), 2)
        session = self.work / "calls" / f"{call['index']}.session.json"
        call["session_s"] = round(json.loads(session.read_text())["session_s"], 2) if session.exists() else None
        call["ncu_exit"] = returncode
        call["process_output_tail"] = output.read_text(errors="replace").strip().splitlines()[-15:]
        log_path = self.work / call["report"].replace(".ncu-rep", ".log")
        call["ncu_log_tail"] = log_path.read_text().strip().splitlines()[-8:] if log_path.exists() else []
        self.log(f"[record]   ncu exit {returncode} in {call['ncu_wall_s']} s (session {call['session_s']} s)")
        if returncode != 0 or call["session_s"] is None:
            raise RecorderError(
                f"ncu or the inner process failed for call {call['index']} ({call.get('benchmark')}): exit {returncode}"
                "\n" + "\n".join(call["process_output_tail"] + call["ncu_log_tail"])
            )
        return returncode

    def extract_df_from_report(self, report_path, metrics, configs, iterations, func, *args, **kwargs):
        index = self.index
        if self.role == "inner":  # a call before the target: what the outer extracted
            kind, payload = pickle.loads(self._stored(index).read_bytes())
            if kind == "error":
                raise payload
            return payload
        import inspect

        call = self.calls[-1]
        if call.pop("serve", False):
            return self.serve_committed(index, call)
        extract = self.original["extract_df_from_report"]
        bound = inspect.signature(extract).bind(report_path, metrics, configs, iterations, func, *args, **kwargs)
        call["combine_kernel_metrics"] = getattr(bound.arguments.get("combine_kernel_metrics"), "__name__", None)
        call["tag"] = f"{func.__name__}-{func._nspy_run_id}"
        try:
            raw = extract(report_path, metrics, configs, iterations, func, *args, **kwargs)
        except Exception as error:  # what nsight's extraction raised, e.g. the several-kernels RuntimeError
            call["error"] = {"type": type(error).__name__, "message": str(error)}
            self._stored(index).write_bytes(pickle.dumps(("error", error)))
            self.log(f"[record]   nsight raised {type(error).__name__}: {str(error).splitlines()[0]}")
            raise
        call["raw_frame"] = encode(raw)
        call["report_bytes"] = Path(report_path).stat().st_size
        self._stored(index).write_bytes(pickle.dumps(("frame", raw)))
        return raw

    def serve_committed(self, index: int, call: dict):
        """A call this machine must not run (clock control other than none), from the committed recording."""
        keys = ("section", "benchmark", "cache_control", "clock_control", "runs", "configs")
        wanted = {key: call[key] for key in keys}
        found = committed_call(wanted)
        if found is None:
            raise RecorderError(
                f"call {index} ({call['benchmark']}, cell {call['cell']}) asks for clock_control="
                f"{call['clock_control']!r}, which this recorder refuses: the GPU runner is shared and its clocks "
                f"must stay as they are (ncu gets --clock-control {RUNNER_CLOCK_CONTROL}). No committed recording "
                f"holds this call ({wanted}) to reuse. Run it on a GPU of your own, or change the notebook's call."
            )
        call.update(metrics=found["call"]["metrics"], served_from=found["source"], raw_frame=found["call"]["raw_frame"])
        self.log(f"[record] call {index}: section {call['section']} {call['benchmark']} clock_control="
                 f"{call['clock_control']!r} not run here; served from {found['source']['label']}")  # fmt: skip
        raw = decode(found["call"]["raw_frame"])
        self._stored(index).write_bytes(pickle.dumps(("frame", raw)))
        return raw


def committed_call(wanted: dict, folders: list[Path] | None = None) -> dict | None:
    """{"call", "source"} of a committed call with the same section, benchmark, settings and configs, or None.

    `source` names the recording that actually ran it (kept through later recordings that served it again).
    """
    for folder in folders if folders is not None else recording_folders():
        recording = json.loads((folder / "recording.json").read_text())
        for call in recording.get("calls", []):
            if all(call.get(key) == value for key, value in wanted.items()) and call.get("raw_frame"):
                provenance = recording.get("provenance", {})
                source = call.get("served_from") or {
                    "folder": folder.name,
                    "created_utc": recording.get("created_utc"),
                    "notebook_commit": provenance.get("notebook_commit"),
                    "gpu": provenance.get("gpu"),
                    "ncu_version": provenance.get("ncu_version"),
                    "call_index": call.get("index"),
                    "label": f"the recording of {recording.get('created_utc')} in {folder.name} (notebook commit "
                    f"{str(provenance.get('notebook_commit'))[:7]})",
                }
                return {"call": call, "source": source}
    return None


def log_line(text: str) -> None:
    """The recorder's own log: straight to the terminal, never into a cell's captured output."""
    sys.__stdout__.write(f"{text}\n")
    sys.__stdout__.flush()


def child_env(work: Path) -> dict:
    env = dict(os.environ)
    env.update(NSPY_NCU_INIT_AT_IMPORT="0", NSPY_TUTORIAL_OUT=str(work / "out"), MPLBACKEND="Agg")
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ---------------------------------------------------------------- running cells
LAUNCH_MODE = {
    "active_tool": "none (ncu launch mode: ncu runs the process, nothing attaches)",
    "profiler": "ncu (launch mode, scripts/record_ncu.py)",
}


def section_one_names(namespace: dict, environment: dict | None = None):
    """The names section 1 leaves for later sections (plumbing/cells.py), made with the functions section 1 uses,
    after the harness and setup-helper cells ran in namespace. `environment` overrides what they record."""
    import matplotlib

    matplotlib.use("Agg")
    import nsight  # NSPY_NCU_INIT_AT_IMPORT=0: nothing is loaded; ncu runs this process from outside
    import numpy as np
    import pandas as pd
    import torch
    from matplotlib import pyplot as plt

    facts = namespace["environment_facts"](torch, nsight, "ncu", libcupti=namespace.get("LIBCUPTI"))
    namespace["ENVIRONMENT"].update({**facts, **(environment or {})})
    namespace.update(nsight=nsight, torch=torch, plt=plt, pd=pd, np=np, QUIET=nsight.VerbosityLevel.SILENT)
    namespace.update(USE_NCU=True, CUPTI_REASON="")
    values = namespace["section_one_values"](namespace["ENVIRONMENT"], True)
    namespace.update(zip(("L2_BYTES", "PEAKS_LABEL", "PEAKS", "NCU_ONLY_SKIP"), values, strict=True))
    missing = [name for name in SECTION_ONE_NAMES if name not in namespace]
    if missing:
        raise RecorderError(f"section 1's names {missing} are not made here: update section_one_names")


def run_cell(namespace: dict, cells: list[dict], cell_id: str) -> str:
    """Execute one notebook cell in namespace; return what it printed (also echoed)."""
    source = cell_source(cells, cell_id)
    buffer = io.StringIO()

    class Tee(io.TextIOBase):
        def write(self, text):
            buffer.write(text)
            return sys.__stdout__.write(text)

    filename = f"<notebook cell {cell_id}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)  # for inspect
    with contextlib.redirect_stdout(Tee()):
        exec(compile(source, filename, "exec"), namespace)
    return buffer.getvalue()


def replay(role: str, calls: ProfiledCalls, log=log_line) -> tuple[dict, dict]:
    """Run the plan's cells; return (namespace, {cell id: stdout})."""
    cells = load_cells()
    namespace: dict = {"__name__": "__main__"}
    outputs = {}
    steps = plan(cells)
    for section, cell_id in steps:
        if role == "inner" and cell_id in OUTER_ONLY_CELLS:
            continue
        calls.where = (section, cell_id)
        calls.allowed = section is not None
        log(f"[record] cell {cell_id}")
        try:
            outputs[cell_id] = run_cell(namespace, cells, cell_id)
        except InnerDone:
            raise
        except BaseException:
            if role == "inner":
                raise
            outputs[cell_id] = "FAILED\n" + traceback.format_exc()
            log(outputs[cell_id])
            namespace["__record_failed__"] = cell_id
            break
        if cell_id == "setup-helpers":  # then the names section 1 defines, before any cell that uses them
            section_one_names(namespace, environment=LAUNCH_MODE)
            calls.install()
    return namespace, outputs


# ---------------------------------------------------------------- provenance
def ncu_executable() -> str:
    given = os.environ.get("NCU_PATH")
    if given:
        path = Path(given)
        return str(path / "ncu" if path.is_dir() else path)
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


def notebook_commit() -> str:
    if os.environ.get("NSPY_RECORD_COMMIT"):
        return os.environ["NSPY_RECORD_COMMIT"]
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def notebook_sha256() -> str:
    return hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()


def notebook_provenance(cells: list[dict], cell_ids: list[str]) -> dict:
    """Which notebook the recording ran: its commit, its hash and each executed cell's hash."""
    return {
        "notebook_commit": notebook_commit(),
        "notebook_sha256": notebook_sha256(),
        "cell_sha256": {
            cell_id: hashlib.sha256(cell_source(cells, cell_id).encode()).hexdigest() for cell_id in cell_ids
        },
    }


def gpu_slug(gpu: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200': the start of a recording folder's name."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")


def work_folder(default_name: str) -> Path:
    """The recorder's scratch folder (NSPY_RECORD_WORK, else ./<default_name>), emptied; git ignores both defaults."""
    work = Path(os.environ.get("NSPY_RECORD_WORK") or (Path.cwd() / default_name)).resolve()
    shutil.rmtree(work, ignore_errors=True)
    return work


def folder_name(gpu: str, ncu_version: str) -> str:
    slug = gpu_slug(gpu)
    return f"{slug}-ncu-{ncu_version.rsplit('.', 1)[0] if ncu_version.count('.') > 2 else ncu_version}"


def query_metrics(ncu: str, bases: list[str], dest: Path, version: str):
    """The tu104 metric list (families the notebook uses) and the valid suffixes of the notebook's base metrics."""
    families = sorted({base.split("__", 1)[0] + "__" for base in bases})
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


def run_cupti_install_check(namespace: dict) -> str:
    try:
        return str(namespace["find_libcupti"](namespace["CUPTI_DIR"]))
    except Exception as error:  # noqa: BLE001 - reported, then s9-cupti fails with the notebook's own message
        return f"not found: {error}"


# ---------------------------------------------------------------- main
def outer(dest_root: Path, keep_work: bool) -> Path:
    import nsight
    import pandas as pd
    import torch

    check_nsight_internals()
    ncu = ncu_executable()
    version, ncu_says = launch_mode_ncu_version(ncu)
    put_first_on_path(Path(ncu).parent)  # as section 1 does: the environment names this ncu, the inner finds it
    work = work_folder("record_ncu_work")
    (work / "calls").mkdir(parents=True)
    os.environ.update(child_env(work))
    calls = ProfiledCalls(work, "outer", ncu=ncu)
    started = time.perf_counter()
    namespace, outputs = replay("outer", calls)
    total = time.perf_counter() - started
    env = dict(namespace["ENVIRONMENT"])
    dest = dest_root / folder_name(env["gpu"], version)
    dest.mkdir(parents=True, exist_ok=True)
    cells = load_cells()
    per_section: dict = {}
    for call in calls.calls:
        if call.get("served_from"):  # not run here: its time belongs to the recording it came from
            continue
        key = str(call["section"])
        per_section.setdefault(key, {"calls": 0, "ncu_wall_s": 0.0, "session_s": 0.0})
        per_section[key]["calls"] += 1
        per_section[key]["ncu_wall_s"] = round(per_section[key]["ncu_wall_s"] + call["ncu_wall_s"], 2)
        per_section[key]["session_s"] = round(per_section[key]["session_s"] + (call["session_s"] or 0), 2)
    define_values = {}
    for name in sorted(benchmark_setting_names(cells)):
        value = namespace.get(name)
        if isinstance(value, (int, float, str, list, tuple)):
            define_values[name] = encode(value)
    recording = {
        "what": "Nsight Compute frames of the notebook's sections 4, 6, 7, 9, recorded in ncu launch mode by "
        "scripts/record_ncu.py: nsight-python's own profiling session ran under the ncu command line with the "
        "flags nsight's attach command passes; nsight's own extraction and aggregation built the frames.",
        "mode": "launch",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "provenance": {
            "gpu": env["gpu"],
            "driver": env["driver"],
            "ncu_version": version,
            "ncu_version_text": ncu_says,
            "ncu_path": ncu,
            "nsight_python": nsight.__version__,
            "ncu_report": importlib_version("ncu-report"),
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "pandas": pd.__version__,
            "python": sys.version.split()[0],
            "host": socket.gethostname(),
            **notebook_provenance(cells, [cell_id for _, cell_id in plan(cells)]),
            "libcupti_for_s9": run_cupti_install_check(namespace),
        },
        "environment": encode(env),
        "define_values": define_values,
        "wall_s": {"total": round(total, 1), "per_section": per_section},
        "calls": calls.calls,
        "variables": {},
        "cell_output": outputs,
        "failed_cell": namespace.get("__record_failed__"),
    }
    for number, spec in SECTIONS.items():
        for name in spec["names"]:
            if name in namespace:
                recording["variables"][name] = encode(namespace[name])
            else:
                print(f"[record] WARNING: section {number} left no variable {name!r}")
    recording["variables"]["s7_error"] = next(
        (call["error"] for call in calls.calls if call.get("error") and call["section"] == 7), None
    )
    (dest / "recording.json").write_text(json.dumps(recording, indent=1, allow_nan=False) + "\n")
    for name in REPORT_FOLDERS:  # everything section 7's call and s10-profile left there: section 10 reads it
        report_folder = work / "out" / name
        if not report_folder.is_dir():
            continue
        target = dest / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        for path in sorted(report_folder.iterdir()):
            if path.suffix == ".ncu-rep":  # it embeds the cubin of each kernel's module (torch's: megabytes)
                (target / f"{path.name}.xz").write_bytes(lzma.compress(path.read_bytes(), preset=9))
            elif path.is_file():
                shutil.copy2(path, target / path.name)
    bases = sorted({metric.split(".", 1)[0] for metric in notebook_metrics(cells)})
    print("[record] query-metrics:", query_metrics(ncu, bases, dest, version))
    print(f"[record] wrote {dest} in {total:.1f} s; per section: {json.dumps(per_section)}")
    if namespace.get("__record_failed__"):
        raise RecorderError(f"cell {namespace['__record_failed__']} failed; the recording in {dest} is partial")
    if not keep_work:
        shutil.rmtree(work / "calls", ignore_errors=True)
    return dest


def importlib_version(name: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def inner(work: Path, target: int) -> int:
    check_nsight_internals()
    calls = ProfiledCalls(work, "inner", target=target)
    try:
        replay("inner", calls, log=lambda *_: None)
    except InnerDone:
        return 0
    print(f"[record inner] the cells ended before profiled call {target}", file=sys.stderr)
    return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "docs" / "verified", help="folder for the recording")
    parser.add_argument("--plan", action="store_true", help="print the cells it would run and the metrics; no GPU")
    parser.add_argument("--keep-work", action="store_true", help="keep the scratch pickles between processes")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--call", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # before nsight is imported: ncu launches this process instead
    if args.inner:
        return inner(args.work, args.call)
    if args.plan:
        cells = load_cells()
        for section, cell_id in plan(cells):
            print(f"section {section or '-'}: {cell_id}")
        print("metrics in the notebook:", ", ".join(notebook_metrics(cells)))
        return 0
    try:
        outer(args.dest, args.keep_work)
    except RecorderError as error:
        print(f"record_ncu: {error}", file=sys.stderr)
        traceback.print_exc()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
