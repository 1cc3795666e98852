#!/usr/bin/env python3
"""Record the Nsight Compute half of the notebook (sections 4, 6, 7, 9 and 10) on a GPU machine, in launch mode.

    python3 scripts/record_ncu.py                 # on a GPU machine with ncu 2025.1+ on PATH (or NCU_PATH)
    python3 scripts/record_ncu.py --plan          # anywhere: print which notebook cells it would run

Why launch mode: nsight-python 1.1.0 attaches ncu 2026.2.1+ to the running process. Where only an older ncu
exists (the project's GPU runner has 2025.3.1), nsight's own profiling session can still run as a script under the
ncu command line, with exactly the flags nsight's attach command passes:

    ncu --nvtx --nvtx-include regex:nsight-python@.+ --log-file LOG --cache-control <all|none>
        --clock-control <none|base> --replay-mode <kernel|range> --metrics <list> -f -o REPORT python3 ...

How (one ncu process per profiled call): this script (the outer process) executes the notebook's own cells, by
cell id, in a namespace where `nsight` was imported with NSPY_NCU_INIT_AT_IMPORT=0 and USE_NCU is True, with
nsight.collection.ncu.NCUCollector.collect replaced by a pinned re-implementation of it (nsight-python==1.1.0).
For the k-th profiled call the replacement starts `ncu ... python3 record_ncu.py --inner --call k`; that inner
process replays the same cells, serves calls 0..k-1 from what the outer already extracted, and for call k runs
nsight.collection.core.run_profile_session exactly as NCUCollector.collect does (minus nvInjBeginProfiling and
the attach, which ncu's launch replaces), then exits. The outer then reads the report with nsight's own
extraction.extract_df_from_report (same arguments as NCUCollector.collect) and returns the raw frame to nsight's
own wrapper, which aggregates it. So the notebook's variables (doubling_frames, limits_frame, fusion_frame,
ncu_matmul_frame, ...) end up holding exactly what to_dataframe() built from real reports.

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
NOTEBOOK = ROOT / "nsight_python_t4_tutorial.ipynb"
NSIGHT_VERSION = "1.1.0"
MIN_NCU = (2025, 1)
NVTX_INCLUDE = "regex:nsight-python@.+"  # nsight.utils.NVTX_DOMAIN, as nsight's attach command passes it

# The notebook's cells, by id (docs: /work/briefs/contract.md, "Cell contract"). Section 1's names are made here
# the way section 1 makes them (see section_one_names); the harness and the helpers come from the notebook.
PRELUDE_CELLS = ("harness", "setup-helpers")
PRELUDE_NAMES = ("add_kernels", "profile_each", "SWEEP_SIZES")  # run the cells that define these (sections 2, 5)
SECTIONS = {
    4: {"define": ("s4-define",), "run": ("s4-run",), "names": ("doubling_frames",)},
    6: {"define": ("s6-define",), "run": ("s6-run",), "names": ("limits_frame",)},
    7: {"define": ("s7-define",), "run": ("s7-error", "s7-run"), "names": ("several_kernels_error", "fusion_frame")},
    9: {"define": ("s9-child", "s9-define"), "run": ("s9-cupti", "s9-ncu"),
        "names": ("cupti_result", "ncu_matmul_frame", "ncu_wall_s")},
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

# sha256 of inspect.getsource(NCUCollector.collect) in nsight-python 1.1.0: the code re-implemented below.
PINNED_COLLECT_SHA256 = "d83475db4b53160f93a3801cf6455cd211c98c4fd283d2deb28cc0e35dc7b02b"


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
        "(the cell contract). Update SECTIONS/PRELUDE_CELLS there if the notebook's cell ids changed."
    )


def section_cells(cells: list[dict], number: int) -> list[dict]:
    """The cells of section `number` (ids s<N> and s<N>-...), in notebook order."""
    return [cell for cell in cells if cell["id"] == f"s{number}" or (cell["id"] or "").startswith(f"s{number}-")]


def analysis_cell_ids(cells: list[dict], number: int) -> list[str]:
    """Section `number`'s code cells other than its opener, define and run cells."""
    spec = SECTIONS[number]
    skip = {f"s{number}-open", *spec["define"], *spec["run"]}
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
    """JSON for frames (with dtypes), dicts with any keys, tuples, numpy scalars."""
    import numpy as np
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        columns = [str(column) for column in value.columns]
        data = {str(column): [encode(item) for item in value[column].tolist()] for column in value.columns}
        dtypes = {str(column): str(dtype) for column, dtype in value.dtypes.items()}
        return {"__frame__": {"columns": columns, "dtypes": dtypes, "data": data}}
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
        return None if math.isnan(value) else float(value)
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
        return frame
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


def cpu_section_one_source(folder: Path | str, scripts: Path | str = ROOT / "scripts") -> str:
    """A folded cell for a kernel that ran the harness: section 1's names, from a recording, without a GPU.

    Used by tests/test_ncu_recordings.py and scripts/render_recorded.py (which passes paths relative to the
    repository). No torch: the define cells name it only inside benchmark bodies, which never run here; the
    recorded frames stand in for the profiled calls.
    """
    return f"""# @title Section 1's names, from the recording in {Path(folder).name} (no GPU in this process)
import os
import sys

os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # nothing to load: the frames were recorded on the GPU machine
sys.path.insert(0, {json.dumps(str(scripts))})
import matplotlib.pyplot as plt
import nsight
import numpy as np
import record_ncu as _record_ncu
from IPython.display import Image, display

RECORDING = _record_ncu.load_recording({json.dumps(str(folder))})
ENVIRONMENT.update(RECORDING["environment"])
L2_BYTES = ENVIRONMENT["l2_bytes"]
PEAKS_LABEL, PEAKS = lookup_peaks(ENVIRONMENT["gpu"])  # as section 1 names them
USE_NCU, NCU_ONLY_SKIP, CUPTI_REASON = True, "", ""
QUIET = nsight.VerbosityLevel.SILENT
CUPTI_DIR = Path("/nonexistent-cupti-dir")  # the CUPTI side of section 9 is recorded too
"""


def inject_source(number: int) -> str:
    """A folded cell that sets section `number`'s recorded variables (after cpu_section_one_source ran)."""
    names = json.dumps(list(SECTIONS[number]["names"]))
    return (
        f"# @title Section {number}: the variables its profiled calls produced on the GPU machine (recorded)\n"
        f'globals().update({{name: RECORDING["variables"][name] for name in {names}}})\n'
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


# ---------------------------------------------------------------- nsight internals, pinned
def check_nsight_internals():
    """Fail clearly unless nsight-python is 1.1.0 with the internals this script re-implements."""
    import inspect

    import nsight
    from nsight import extraction
    from nsight.collection import core, ncu

    problems = []
    if nsight.__version__ != NSIGHT_VERSION:
        problems.append(f"nsight-python is {nsight.__version__}, this recorder is written for {NSIGHT_VERSION}")
    collect_sha = hashlib.sha256(inspect.getsource(ncu.NCUCollector.collect).encode()).hexdigest()
    if collect_sha != PINNED_COLLECT_SHA256:
        problems.append("nsight.collection.ncu.NCUCollector.collect is not the 1.1.0 code re-implemented here")
    expected = {
        core.run_profile_session: [
            "func", "configs", "runs", "verbosity", "thermal_mode", "thermal_wait", "thermal_cont",
            "thermal_timeout", "thermal_device", "info_collectors_list", "output_prefix",
        ],
        extraction.extract_df_from_report: [
            "report_path", "metrics", "configs", "iterations", "func", "derive_metric", "ignore_kernel_list",
            "verbosity", "combine_kernel_metrics", "info_collectors_list", "config_scope_columns",
            "annotation_scope_columns", "info_prefix",
        ],
    }  # fmt: skip
    for function, parameters in expected.items():
        if list(inspect.signature(function).parameters) != parameters:
            problems.append(f"{function.__module__}.{function.__name__} changed its parameters")
    if problems:
        raise RecorderError(
            "scripts/record_ncu.py drives nsight-python's internal functions and is pinned to "
            f"nsight-python=={NSIGHT_VERSION}: " + "; ".join(problems) + f". Install nsight-python=={NSIGHT_VERSION} "
            "or port the recorder (compare NCUCollector.collect with ProfiledCalls.collect)."
        )


def scope_columns(settings) -> tuple[list[str], list[str]]:
    """config/run- and annotation-scope collector columns, as NCUCollector.collect computes them."""
    config_scope, annotation_scope = [], []
    for name, _callback, scope in settings.info_collectors or []:
        if scope in ("config", "run"):
            config_scope.append(name)
        elif scope == "annotation":
            annotation_scope.append(name)
    return config_scope, annotation_scope


class InnerDone(BaseException):
    """The inner process profiled its call: stop replaying cells."""


class ProfiledCalls:
    """The replacement for NCUCollector.collect, in the outer process or in an inner one (under ncu)."""

    def __init__(self, work: Path, role: str, target: int | None = None, ncu: str | None = None, log=None):
        self.work, self.role, self.target, self.ncu = work, role, target, ncu
        self.log = log or log_line
        self.index = 0
        self.where = (None, None)  # (section, cell id) being executed
        self.calls: list[dict] = []  # outer: what each call did
        self.allowed = True

    def install(self):
        from nsight.collection import ncu

        calls = self

        def collect(collector, func, configs, settings):
            return calls.collect(collector, func, configs, settings)

        ncu.NCUCollector.collect = collect

    def _stored(self, index: int) -> Path:
        return self.work / "calls" / f"{index}.pkl"  # scratch between outer and inner, never committed

    def collect(self, collector, func, configs, settings):
        from nsight import extraction
        from nsight.collection import core

        if not self.allowed:
            raise RecorderError(f"cell {self.where[1]!r} called a benchmark, but it is run only for its definitions")
        index, self.index = self.index, self.index + 1
        configs_list = list(configs)
        if self.role == "inner":
            if index < self.target:
                kind, payload = pickle.loads(self._stored(index).read_bytes())
                if kind == "error":
                    raise payload
                return payload
            started = time.perf_counter()
            core.run_profile_session(
                func,
                configs_list,
                settings.runs,
                settings.verbosity,
                settings.thermal_mode,
                settings.thermal_wait,
                settings.thermal_cont,
                settings.thermal_timeout,
                settings.thermal_device,
                settings.info_collectors,
                settings.output_prefix,
            )
            import torch

            torch.cuda.synchronize()
            (self.work / "calls" / f"{index}.session.json").write_text(
                json.dumps({"session_s": time.perf_counter() - started})
            )
            raise InnerDone()

        tag = f"{func.__name__}-{func._nspy_run_id}"
        report_path = f"{settings.output_prefix}ncu-output-{tag}.ncu-rep"
        log_path = f"{settings.output_prefix}ncu-output-{tag}.log"
        call = {
            "index": index,
            "section": self.where[0],
            "cell": self.where[1],
            "benchmark": func.__name__,
            "tag": tag,
            "metrics": list(collector.metrics),
            "cache_control": collector.cache_control,
            "clock_control": collector.clock_control,
            "replay_mode": collector.replay_mode,
            "combine_kernel_metrics": getattr(collector.combine_kernel_metrics, "__name__", None),
            "runs": settings.runs,
            "configs": encode([tuple(c) if isinstance(c, (list, tuple)) else c for c in configs_list]),
            "report": os.path.relpath(report_path, self.work),
        }
        command = [
            self.ncu, "--nvtx", "--nvtx-include", NVTX_INCLUDE, "--log-file", log_path,
            "--cache-control", collector.cache_control, "--clock-control", collector.clock_control,
            "--replay-mode", collector.replay_mode, "--metrics", ",".join(collector.metrics), "-f", "-o", report_path,
            sys.executable, str(Path(__file__).resolve()), "--inner", "--work", str(self.work), "--call", str(index),
        ]  # fmt: skip
        call["command"] = " ".join(command).replace(str(self.work), "WORK")
        settings_text = f"{call['cache_control']}/{call['clock_control']} runs={settings.runs}"
        self.log(f"[record] call {index}: section {self.where[0]} {func.__name__} {settings_text} "
                 f"configs={len(configs_list)} metrics={call['metrics']}")  # fmt: skip
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=child_env(self.work))
        call["ncu_wall_s"] = round(time.perf_counter() - started, 2)
        session = self.work / "calls" / f"{index}.session.json"
        call["session_s"] = round(json.loads(session.read_text())["session_s"], 2) if session.exists() else None
        call["ncu_exit"] = done.returncode
        call["process_output_tail"] = (done.stdout + done.stderr).strip().splitlines()[-15:]
        call["ncu_log_tail"] = Path(log_path).read_text().strip().splitlines()[-8:] if Path(log_path).exists() else []
        self.calls.append(call)
        self.log(f"[record]   ncu exit {done.returncode} in {call['ncu_wall_s']} s (session {call['session_s']} s)")
        try:
            if done.returncode != 0 or call["session_s"] is None:
                raise RecorderError(
                    f"ncu or the inner process failed for call {index} ({func.__name__}): exit {done.returncode}\n"
                    + "\n".join(call["process_output_tail"] + call["ncu_log_tail"])
                )
            config_scope, annotation_scope = scope_columns(settings)
            raw = extraction.extract_df_from_report(
                report_path,
                collector.metrics,
                configs_list,
                settings.runs,
                func,
                settings.derive_metric,
                collector.ignore_kernel_list,
                settings.verbosity,
                collector.combine_kernel_metrics,
                settings.info_collectors,
                config_scope,
                annotation_scope,
                info_prefix=settings.output_prefix or "",
            )
        except RecorderError:
            raise
        except Exception as error:  # what nsight's extraction raised, e.g. the several-kernels RuntimeError
            call["error"] = {"type": type(error).__name__, "message": str(error)}
            self._stored(index).write_bytes(pickle.dumps(("error", error)))
            self.log(f"[record]   nsight raised {type(error).__name__}: {str(error).splitlines()[0]}")
            raise
        call["raw_frame"] = encode(raw)
        call["report_bytes"] = Path(report_path).stat().st_size
        self._stored(index).write_bytes(pickle.dumps(("frame", raw)))
        return raw


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
def section_one_names(namespace: dict, ncu_version: str):
    """The names section 1 defines for later sections (cell contract), made as section 1 makes them."""
    import matplotlib

    matplotlib.use("Agg")
    import nsight  # NSPY_NCU_INIT_AT_IMPORT=0: nothing is loaded; ncu runs this process from outside
    import numpy as np
    import pandas as pd
    import torch
    from matplotlib import pyplot as plt

    props = torch.cuda.get_device_properties(0)
    driver = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    namespace.update(nsight=nsight, torch=torch, plt=plt, pd=pd, np=np, QUIET=nsight.VerbosityLevel.SILENT)
    namespace.update(USE_NCU=True, L2_BYTES=props.L2_cache_size, NCU_ONLY_SKIP="", CUPTI_REASON="")
    namespace["CUPTI_DIR"] = Path(os.environ.get("NSPY_TUTORIAL_CUPTI_DIR", "/nonexistent-cupti-dir"))
    namespace["ENVIRONMENT"].update(
        {
            "gpu": props.name,
            "driver": driver.splitlines()[0] if driver else "?",
            "compute_capability": f"{props.major}.{props.minor}",
            "sms": props.multi_processor_count,
            "l2_bytes": props.L2_cache_size,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "ncu_path": shutil.which("ncu") or os.environ.get("NCU_PATH", ""),
            "ncu_version": ncu_version,
            "nsight_python": nsight.__version__,
            "active_tool": "none (ncu launch mode: ncu runs the process, nothing attaches)",
            "profiler": "ncu (launch mode, scripts/record_ncu.py)",
            "injection_error": "",
            "libcupti": "",
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "python": sys.version.split()[0],
        }
    )
    namespace["PEAKS_LABEL"], namespace["PEAKS"] = namespace["lookup_peaks"](props.name)
    namespace["ENVIRONMENT"]["peaks_from"] = namespace["PEAKS_LABEL"] or "n/a"


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


def replay(role: str, work: Path, calls: ProfiledCalls, ncu_version: str, log=log_line) -> tuple[dict, dict]:
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
        if cell_id == "harness":  # then the names section 1 defines, before any cell that uses them
            section_one_names(namespace, ncu_version)
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


def ncu_version_of(ncu: str) -> tuple[str, str]:
    text = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"Version\s+(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        raise RecorderError(f"cannot read the version of {ncu}: {text.strip()!r}")
    version = ".".join(part for part in match.groups() if part is not None)
    if tuple(int(part) for part in match.groups()[:2]) < MIN_NCU:
        raise RecorderError(f"ncu {version} is older than {'.'.join(map(str, MIN_NCU))}: launch mode needs 2025.1+")
    return version, text.strip()


def notebook_commit() -> str:
    if os.environ.get("NSPY_RECORD_COMMIT"):
        return os.environ["NSPY_RECORD_COMMIT"]
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def folder_name(gpu: str, ncu_version: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
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
    version, version_text = ncu_version_of(ncu)
    work = Path(os.environ.get("NSPY_RECORD_WORK") or (Path.cwd() / "record_ncu_work")).resolve()
    shutil.rmtree(work, ignore_errors=True)
    (work / "calls").mkdir(parents=True)
    os.environ["NSPY_RECORD_NCU_VERSION"] = version
    os.environ.update(child_env(work))
    calls = ProfiledCalls(work, "outer", ncu=ncu)
    started = time.perf_counter()
    namespace, outputs = replay("outer", work, calls, version)
    total = time.perf_counter() - started
    env = dict(namespace["ENVIRONMENT"])
    dest = dest_root / folder_name(env["gpu"], version)
    dest.mkdir(parents=True, exist_ok=True)
    cells = load_cells()
    per_section: dict = {}
    for call in calls.calls:
        key = str(call["section"])
        per_section.setdefault(key, {"calls": 0, "ncu_wall_s": 0.0, "session_s": 0.0})
        per_section[key]["calls"] += 1
        per_section[key]["ncu_wall_s"] = round(per_section[key]["ncu_wall_s"] + call["ncu_wall_s"], 2)
        per_section[key]["session_s"] = round(per_section[key]["session_s"] + (call["session_s"] or 0), 2)
    define_values = {}
    for spec in SECTIONS.values():
        for cell_id in spec["define"]:
            for name in sorted(top_level_names(cell_source(cells, cell_id))):
                value = namespace.get(name)
                if isinstance(value, (int, float, str, list, tuple)) and not callable(value):
                    define_values[name] = encode(value)
    notebook_bytes = NOTEBOOK.read_bytes()
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
            "ncu_version_text": version_text,
            "ncu_path": ncu,
            "nsight_python": nsight.__version__,
            "ncu_report": importlib_version("ncu-report"),
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "pandas": pd.__version__,
            "python": sys.version.split()[0],
            "host": socket.gethostname(),
            "notebook_commit": notebook_commit(),
            "notebook_sha256": hashlib.sha256(notebook_bytes).hexdigest(),
            "cell_sha256": {
                cell_id: hashlib.sha256(cell_source(cells, cell_id).encode()).hexdigest() for _, cell_id in plan(cells)
            },
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
    version = os.environ.get("NSPY_RECORD_NCU_VERSION", "")
    check_nsight_internals()
    calls = ProfiledCalls(work, "inner", target=target)
    try:
        replay("inner", work, calls, version, log=lambda *_: None)
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
