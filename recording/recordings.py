"""The recording library of record_ncu.py and render_recorded.py: the plan, the one executor of cells, values <->
JSON, docs/verified/<folder>/recording.json, and what a CPU runs in place of a section's run cells."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import linecache
import lzma
import math
import re
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path

WING = Path(__file__).resolve().parent  # recording/: this module and the recorder
ROOT = WING.parent
if str(ROOT) not in sys.path:  # run as a script: the plumbing package, the same modules the notebook embeds
    sys.path.insert(0, str(ROOT))
from plumbing.cells import (  # noqa: E402
    HARNESS,
    REPORT_FOLDERS,
    SECTION_DEPENDENCY,
    SECTION_PLAN,
    SETUP_HELPERS,
    SHARED_NAMES,
    section_of,
)

NOTEBOOK = ROOT / "nsight_python_t4_tutorial.ipynb"
RECORDING_FILE = "recording.json"
FORMAT = 2  # 2: per-cell sources, outputs and values, per-section status and cost
ROLES = ("define", "gpu_define", "run")  # the plan's lists; every other code cell of a section is analysis
REPLACED_ON_CPU = ("gpu_define", "run")  # on a CPU, what these bound on the GPU machine stands in for them
PLAIN = (int, float, str, bool, list, tuple, dict, Path, type(None))  # what a recording keeps, with pandas, numpy


class RecorderError(RuntimeError):
    """Something a recorder cannot work around; the message says what to do."""


def load_cells(path: Path = NOTEBOOK) -> list[dict]:
    cells = json.loads(Path(path).read_text())["cells"]
    return [{"id": cell.get("id"), "type": cell["cell_type"], "source": "".join(cell["source"])} for cell in cells]


def cell_source(cells: list[dict], cell_id: str) -> str:
    cell = next((cell for cell in cells if cell["id"] == cell_id), None)
    if cell is None or cell["type"] != "code":
        raise RecorderError(f"the notebook has no code cell with id {cell_id!r}: update SECTION_PLAN in "
                            "plumbing/cells.py if the notebook's cell ids changed")  # fmt: skip
    return cell["source"]


def section_cells(cells: list[dict], number: int) -> list[dict]:
    return [cell for cell in cells if section_of(cell["id"]) == number]  # in notebook order


def section_steps(cells: list[dict], number: int) -> list[tuple[str, str]]:
    """(cell id, role: define, gpu_define, run or analysis) of section `number`'s code cells, in notebook order."""
    if number not in SECTION_PLAN:
        raise RecorderError(f"section {number} is not in plumbing/cells.py's SECTION_PLAN: {sorted(SECTION_PLAN)}")
    roles = {cell_id: role for role in ROLES for cell_id in SECTION_PLAN[number].get(role, ())}
    steps = [(c["id"], roles.get(c["id"], "analysis")) for c in section_cells(cells, number) if c["type"] == "code"]
    if missing := sorted(set(roles) - {cell_id for cell_id, _ in steps}):
        raise RecorderError(f"section {number}'s plan names cells the notebook lacks in that section: {missing}. "
                            "Update SECTION_PLAN in plumbing/cells.py to the notebook's cell ids.")  # fmt: skip
    return steps


def top_level_names(source: str) -> set[str]:
    """Names a cell binds at top level (def, class, assignment), in its `if` blocks too (`if USE_NCU:`)."""
    try:
        return _bound_names(ast.parse(source).body)
    except SyntaxError:
        return set()


def _bound_names(body) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.If):
            names |= _bound_names(node.body) | _bound_names(node.orelse)
    return names


def prelude_cell_ids(cells: list[dict]) -> list[str]:
    """The harness cells, then, in notebook order, the define cells of sections that bind SHARED_NAMES."""
    binds = {cell["id"]: top_level_names(cell["source"]) & set(SHARED_NAMES) for cell in cells
             if cell["type"] == "code" and section_of(cell["id"]) not in (None, 1)}  # fmt: skip
    if missing := set(SHARED_NAMES).difference(*binds.values()):
        raise RecorderError(f"no notebook cell defines {sorted(missing)} (plumbing/cells.py: SHARED_NAMES)")
    return [HARNESS, SETUP_HELPERS] + [cell_id for cell_id, names in binds.items() if names]


def plan(cells: list[dict], sections) -> list[tuple[int | None, str, str]]:
    """(section, cell id, role) in order; a section the recorded ones read (not recorded with them) is 'recorded '."""
    steps = [(None, cell_id, "prelude") for cell_id in prelude_cell_ids(cells)]
    for number in sorted(set(sections) | set(missing_dependencies(sections))):
        prefix = "" if number in sections else "recorded "
        steps += [(number, cell_id, prefix + role) for cell_id, role in section_steps(cells, number)]
    return steps


def missing_dependencies(sections) -> list[int]:
    """The sections the recorded ones read (SECTION_DEPENDENCY) but are not recorded with them."""
    return sorted({dep for number in sections for dep in SECTION_DEPENDENCY.get(number, ()) if dep not in sections})


def source_to_run(cells: list[dict], cell_id: str, role: str) -> str:
    """The cell's source; for a run cell of a section read from a recording, the values it bound there."""
    if role.startswith("recorded ") and role.removeprefix("recorded ") in REPLACED_ON_CPU:
        return inject_source(cell_id)
    return cell_source(cells, cell_id)


def benchmark_setting_names(cells: list[dict], sections=SECTION_PLAN) -> set[str]:
    """Names the sections' visible define cells bind: the benchmark settings a recording must match."""
    sources = [cell_source(cells, cell_id) for number in sections for role in ("define", "gpu_define")
               for cell_id in SECTION_PLAN[number].get(role, ())]  # fmt: skip
    return set().union(*(top_level_names(s) for s in sources if not s.lstrip().startswith("# @title")))


def encode(value):
    """JSON for frames (with dtypes and a named index), series, dicts with any keys, tuples, numpy scalars."""
    import numpy as np
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        spec = {"columns": [str(c) for c in value.columns], "dtypes": {str(c): str(d) for c, d in value.dtypes.items()},
                "data": {str(c): encode(value[c].tolist()) for c in value.columns}}  # fmt: skip
        if not isinstance(value.index, pd.RangeIndex) or value.index.name or value.columns.name:
            spec |= {"index": encode(value.index.tolist()), "index_name": value.index.name,
                     "columns_name": value.columns.name}  # fmt: skip
        return {"__frame__": spec}
    if isinstance(value, pd.Series):
        return {"__series__": {"name": encode(value.name), "index": encode(value.index.tolist()),
                               "values": encode(value.tolist()), "dtype": str(value.dtype)}}  # fmt: skip
    if isinstance(value, dict):
        return {"__dict__": [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": encode(list(value))}
    if isinstance(value, list):
        return [encode(item) for item in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    for kind, plain in (((np.bool_, bool), bool), ((np.integer, int), int), ((str, Path), str)):
        if isinstance(value, kind):
            return plain(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None  # JSON has no NaN or infinity
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
            values = frame[column]
            frame[column] = (
                values.astype(object).where(values.notna(), None) if dtype == "object" else values.astype(dtype)
            )
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
    return value["__repr__"] if "__repr__" in value else {key: decode(item) for key, item in value.items()}


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key


def log_line(text: str) -> None:
    """A recorder's own log: straight to the terminal, never into a cell's captured output."""
    sys.__stdout__.write(f"{text}\n")
    sys.__stdout__.flush()


def without_cell_magic(source: str) -> str:
    """The cell's Python: a first line `%%needs_ncu` dropped (the recorders run only under Nsight Compute, where the
    magic runs the cell as typed)."""
    first, _, rest = source.partition("\n")
    return rest if first.strip() == "%%needs_ncu" else source


def run_cell(namespace: dict, source: str, cell_id: str, echo: bool = True) -> dict:
    """Execute a cell as a notebook would (its last expression's value printed)."""
    buffer = io.StringIO()

    class Tee(io.TextIOBase):
        def write(self, text):
            buffer.write(text)
            return sys.__stdout__.write(text) if echo else len(text)

    filename = f"<notebook cell {cell_id}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)  # for inspect
    tree = ast.parse(without_cell_magic(source), filename)
    shown = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    before = {name: id(value) for name, value in namespace.items()}
    try:
        with contextlib.redirect_stdout(Tee()):
            exec(compile(tree, filename, "exec"), namespace)
            value = None if shown is None else eval(compile(ast.Expression(shown.value), filename, "eval"), namespace)
            if value is not None:
                print(value)
    except BaseException as error:
        error.cell_output = buffer.getvalue()
        raise
    bound = {name: value for name, value in namespace.items()  # data, frames, numpy scalars: no modules or tensors
             if not name.startswith("_") and before.get(name) != id(value) and (isinstance(value, PLAIN)
                 or type(value).__module__.split(".")[0] in ("pandas", "numpy"))}  # fmt: skip
    return {"source": source, "output": buffer.getvalue(), "variables": bound}


def execute(steps, namespace: dict, log=log_line, before=lambda *_: None, after=lambda *_: None, propagate=False):
    cells, runs, failed, wall_s = load_cells(), {}, {}, {}
    for section, cell_id, role in steps:
        dep = next((dep for dep in SECTION_DEPENDENCY.get(section, ()) if dep in failed), None)
        if section not in failed and dep is not None:  # a section it reads failed
            failed[section] = f"{failed[dep]} (section {dep}, which it reads)"
        if section in failed:
            continue
        before(section, cell_id, role)
        log(f"[record] section {section or '-'}: cell {cell_id} ({role})")
        source, started = source_to_run(cells, cell_id, role), time.perf_counter()
        try:
            runs[cell_id] = {**run_cell(namespace, source, cell_id), "role": role}
        except BaseException as error:  # noqa: BLE001 - recorded with its traceback; the other sections go on
            if propagate:
                raise
            output = getattr(error, "cell_output", "") + "FAILED\n" + traceback.format_exc()
            runs[cell_id] = {"source": source, "output": output, "variables": {}, "role": role, "failed": True}
            log(output)
            failed[section] = cell_id
            if section is None:
                break
            continue
        finally:
            wall_s[section] = wall_s.get(section, 0.0) + time.perf_counter() - started
        after(section, cell_id, role)
    return {"runs": runs, "failed": failed, "wall_s": wall_s}


def recorded_cells(runs: dict, commit: str, created: str) -> dict:
    """Every cell the recorder ran (a prelude cell in no section), not those of a section read from a recording."""
    return {cell_id: {"section": None if run["role"] == "prelude" else section_of(cell_id), "role": run["role"],
                      "source": run["source"], "sha256": hashlib.sha256(run["source"].encode()).hexdigest(),
                      "output": run["output"], "failed": run.get("failed", False),
                      "variables": {name: encode(value) for name, value in sorted(run["variables"].items())},
                      "notebook_commit": commit, "recorded_utc": created}
            for cell_id, run in runs.items() if not run["role"].startswith("recorded ")}  # fmt: skip


def section_entry(number: int, status: dict, failed: dict, cost: dict, commit: str, created: str) -> dict:
    """A recorded section: its status (FAILED, naming the cell, if one raised), headline and cost."""
    info = {"status": "NOT RUN", "reason": "", **status.get(number, {})}
    if number in failed:
        info |= {"status": "FAILED", "reason": f"cell {failed[number]} failed"}
    return {"status": info["status"], "reason": info["reason"], "headline": info.get("headline", ""),
            "failed_cell": failed.get(number), "cost": cost, "notebook_commit": commit,
            "recorded_utc": created}  # fmt: skip


def new_recording(what, provenance, namespace, done, sections, commit, created, cost) -> dict:
    """A recording of `sections` from what execute() did in namespace; cost(number) is a section's cost."""
    env, status = dict(namespace["ENVIRONMENT"]), namespace.get("SECTIONS", {})
    sha256 = hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    provenance = {"gpu": env["gpu"], "driver": env["driver"], **provenance, "host": socket.gethostname(),
                  "notebook_commit": commit, "notebook_sha256": sha256}  # fmt: skip
    return {"format": FORMAT, "what": what, "mode": "ncu", "created_utc": created, "provenance": provenance,
            "environment": encode(env),
            "sections": {str(n): section_entry(n, status, done["failed"], cost(n), commit, created) for n in sections},
            "cells": recorded_cells(done["runs"], commit, created),
            "figures": encode([f for f in namespace.get("FIGURES", []) if f["section"] in sections])}  # fmt: skip


def merge(old: dict | None, new: dict, sections: list[int]) -> dict:
    """A recording of `sections` over an older one: the other sections stay as they were."""
    if not old or old.get("format") != FORMAT:
        return new
    redone = set(map(str, sections))
    merged = {**new, "sections": {k: v for k, v in old["sections"].items() if k not in redone} | new["sections"]}
    kept = {k: v for k, v in old["cells"].items() if v["section"] is not None and str(v["section"]) not in redone}
    cells = {k: v for k, v in new["cells"].items() if v["section"] is None and k not in kept} | kept
    cells |= {k: v for k, v in new["cells"].items() if v["section"] is not None}
    merged["cells"] = dict(sorted(cells.items(), key=lambda item: item[1]["section"] or -1))  # prelude first
    for key in ("calls", "figures"):  # figures are stored encoded ({"__dict__": ...}): read their section decoded
        if key in new:
            others = [item for item in old.get(key, []) if str(decode(item).get("section")) not in redone]
            merged[key] = sorted(others + new[key], key=lambda item: decode(item).get("section") or 0)
    if "define_values" in new:  # the recorded sections' settings are the new recording's alone, even those now gone
        settings = benchmark_setting_names(load_cells(), sections)
        kept = {name: value for name, value in old.get("define_values", {}).items() if name not in settings}
        merged["define_values"] = kept | new["define_values"]
    return merged | {"sections_recorded_last": sections}


def write_recording(dest: Path, recording: dict, sections: list[int]) -> Path:
    path = Path(dest) / RECORDING_FILE
    merged = merge(json.loads(path.read_text()) if path.exists() else None, recording, sections)
    Path(dest).mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=1, allow_nan=False) + "\n")
    return path


def load_recording(folder: Path) -> dict:
    """A recording with its values decoded; `variables`: every cell's, a later cell's value of a name winning."""
    recording = json.loads((Path(folder) / RECORDING_FILE).read_text())
    if recording.get("format") != FORMAT:
        raise RecorderError(f"{folder}: recording format {recording.get('format')}, this library reads {FORMAT}")
    recording["environment"], recording["variables"] = decode(recording["environment"]), {}
    for entry in recording["cells"].values():
        entry["variables"] = {name: decode(value) for name, value in entry["variables"].items()}
        recording["variables"].update(entry["variables"])
    return recording


def recording_folders(verified: Path = ROOT / "docs" / "verified") -> list[Path]:
    return sorted(path.parent for path in Path(verified).glob(f"*/{RECORDING_FILE}"))


def recorded_sections(recording: dict) -> list[int]:
    return sorted(int(number) for number in recording["sections"])


def comparable(value) -> str:
    """A setting's value as text to compare across processes: a function's repr names its address, which differs
    in every process, and a program's text (section 9's child) may come back from inspect with other blank lines."""
    text = re.sub(r" at 0x[0-9a-f]+", "", json.dumps(value, default=str, sort_keys=True))
    text = re.sub(CUPTI_PRELOAD_TEXT, "", text)  # section 9's child: how it finds this machine's CUPTI set
    return re.sub(r"(\\n)+", r"\\n", text)


# The first lines of a CUPTI child (setup_helpers.CUPTI_PRELOAD), as JSON text: they load a machine's CUPTI set.
# A bridge: section 9 of the committed recording ran a preload that embedded the runner's folder; today's reads it
# where the child runs. Once section 9 is re-recorded, drop this and its test in tests/test_recordings.py.
CUPTI_PRELOAD_TEXT = r"import ctypes, glob, os, sys\\n.*?mode=os\.RTLD_GLOBAL\)\\n"


# Values, not functions or modules: what a recording keeps. dict is not yet one: the committed recording holds none
# of the define cells' dicts (EVERY_CALL, rates, ...); add it here with the next re-recording of every section.
SETTING_TYPES = (int, float, str, list, tuple)


def setting_values(namespace: dict, names) -> dict:
    """The settings among `names` (values of SETTING_TYPES in namespace), encoded: what record_ncu.py records."""
    return {name: encode(namespace[name]) for name in sorted(names) if isinstance(namespace.get(name), SETTING_TYPES)}


def settings_older_than(recording: dict, namespace: dict, names) -> list[str]:
    """Of `names`, the settings (setting_values) whose value in namespace is not the recording's `define_values`
    one, or that the recording lacks (a setting added since)."""

    recorded = recording.get("define_values", {})
    now = {name: comparable(value) for name, value in setting_values(namespace, names).items()}
    return sorted(name for name in now if name not in recorded or comparable(recorded[name]) != now[name])


def require_recorded_settings(recording: dict, namespace: dict, names, cell_id: str) -> None:
    """RecorderError unless cell_id's settings are the recording's: figures of other sizes must not be shown."""
    if stale := settings_older_than(recording, namespace, names):
        raise RecorderError(
            f"the recording ({recording['created_utc']}) is older than the notebook: cell {cell_id} sets {stale} "
            "otherwise; re-record its section on the GPU machine (recording/record_ncu.py --sections N), then run "
            "tools/render_recorded.py"
        )


def cpu_section_one_source(folder: Path | str, wing: Path | str = WING) -> str:
    """A folded cell for a kernel that ran the harness: section 1's names from a recording, without GPU or torch."""
    name = json.dumps(Path(folder).name)  # quoted: whatever the folder's name holds, it stays in the title's comment
    return f"""# @title Section 1's names, from the recording in {name} (no GPU in this process)
import os
import sys

os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # nothing to load: the values were recorded on the GPU machine
sys.path.insert(0, str(STARTED_IN / {json.dumps(str(wing))}))  # recordings.py; the harness moved to the output folder
import nsight
import numpy as np
import recordings as _recording
from IPython.display import Image, display

RECORDING = _recording.load_recording(STARTED_IN / {json.dumps(str(folder))})
ENVIRONMENT.update(RECORDING["environment"])
USE_NCU, CUPTI_REASON = True, ""
L2_BYTES, PEAKS_LABEL, PEAKS = section_one_values(ENVIRONMENT)
QUIET = nsight.VerbosityLevel.SILENT
CUPTI_PACKAGES_DIR = Path("/nonexistent-cupti-dir")  # no CUPTI child runs here: section 9's CUPTI side is recorded
"""


def inject_source(cell_id: str) -> str:
    """A folded cell that binds what the run cell `cell_id` bound on the GPU machine (after cpu_section_one_source)."""
    return (
        f"# @title What {cell_id} bound on the GPU machine (recorded)\n"
        f'if "{cell_id}" not in RECORDING["cells"]:\n'
        "    raise RuntimeError(\n"
        f'        "the recording has no cell {cell_id}: re-record its section on the GPU machine "\n'
        '        "(record_ncu.py --sections N), then run tools/render_recorded.py"\n'
        "    )\n"
        f'globals().update(RECORDING["cells"]["{cell_id}"]["variables"])\n'
    )


def cpu_section_sources(cells: list[dict], number: int) -> list[tuple[str, str, str]]:
    """(cell id, role, source to run on a CPU) for section `number`."""
    return [
        (cell_id, role, source_to_run(cells, cell_id, f"recorded {role}"))
        for cell_id, role in section_steps(cells, number)
    ]


def restore_report_folders(folder: Path, out_dir: Path) -> list[Path]:
    """The recorded report folders (reports decompressed) into out_dir, where the notebook's cells look."""
    written = []
    for path in sorted(path for name in REPORT_FOLDERS for path in (Path(folder) / name).glob("*")):
        written.append(Path(out_dir) / path.parent.name / (path.stem if path.suffix == ".xz" else path.name))
        written[-1].parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".xz":
            written[-1].write_bytes(lzma.decompress(path.read_bytes()))
        else:
            shutil.copy2(path, written[-1])
    return written
