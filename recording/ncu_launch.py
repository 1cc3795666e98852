"""Nsight Compute launch mode under the headless run: each nsight-python call profiled in a child Python under `ncu`.

nsight-python 1.1.0 attaches ncu 2026.2.1 or newer; the GPU runner has 2025.3.1. So in the kernel (the outer,
launch_startup.py) nsight's NCUCollector.collect runs with the functions it calls replaced (ProfiledCalls): it starts
`ncu <nsight's flags, --clock-control none> python ncu_inner.py --work W --call N-k`, whose inner replays section N's
cells up to call k and runs it in nsight's own session; the outer extracts the report with nsight's extraction.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import pickle
import re
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the plumbing package, when this file runs from recording/
    sys.path.insert(0, str(ROOT))

from plumbing.cells import (  # noqa: E402
    HARNESS,
    SECTION_ONE_CELLS,
    SECTION_PLAN,
    SETUP_HELPERS,
    section_of,
)

NOTEBOOK = ROOT / "nsight_python_t4_tutorial.ipynb"
# What section 1 leaves for the later sections (ncu_inner.py checks them in a child).
SECTION_ONE_NAMES = ("nsight", "torch", "USE_NCU", "gpu", "needs_ncu", "ENVIRONMENT", "CUPTI_PACKAGES_DIR")
# Names a section's define cells bind for later sections: a child runs those cells before its section's.
SHARED_NAMES = ("quiet", "add")
# Run cells that start no nsight-python call under Nsight Compute: the CUPTI child and section 10's own ncu.
NOT_UNDER_NCU = ("s9-install", "s9-child", "s9-cupti", "s10-profile")
NSIGHT_VERSION = "1.1.0"
INNER = Path(__file__).resolve().parent / "ncu_inner.py"
# The GPU runner is shared: its clocks stay as they are, so every ncu there gets `--clock-control none`. A call that
# asks for another (section 4's clock_control="base") runs with it too; ncu_launch_calls.json notes both.
RUNNER_CLOCK_CONTROL = "none"
NCU_CALL_TIMEOUT_S = 300  # one profiled call under ncu, the replay of its section's cells included
MODE = "launch: each profiled call in a child Python under `ncu --clock-control none` (recording/)"
DECISION = "decide_ncu"  # section 1's helper that says whether Nsight Compute is used (plumbing/setup_helpers.py)
# Section 1's visible cells a child replays after nsight is loaded (plumbing/cells.py's SECTION_ONE_CELLS roles): the
# import, the %%needs_ncu magic and torch; never the installs or the checks of what was installed.
SECTION_ONE_REPLAYED = ("import", "magic", "torch")

# NCUCollector.collect runs unchanged; these functions it calls are replaced (module, name), as nsight-python 1.1.0
# names and calls them: another version is refused (load_nsight) rather than patched blind.
NCU, CORE, EXTRACTION = "nsight.collection.ncu", "nsight.collection.core", "nsight.extraction"
PATCHED_FUNCTIONS = (
    ("nsight.tools_manager", "activate"),
    (NCU, "begin_profiling"),
    (NCU, "end_profiling"),
    (NCU, "launch_ncu"),
    (CORE, "run_profile_session"),
    (EXTRACTION, "extract_df_from_report"),
)
ATTACH_ONLY_OPTIONS = {"--mode": "attach", "--process-id": None}  # dropped: in launch mode ncu starts the process
# Options of an ncu that profiles nothing (it prints its version, lists metrics, or reads a report: s10-details).
QUERY_OPTIONS = {"--version", "--query-metrics", "--query-metrics-mode", "--list-sections", "--list-sets", "--import"}
QUERY_OPTIONS.add("--list-injection-path-64")  # where nsight looks for Nsight Compute's injection library


def query_t4_metrics(ncu: str, out: Path) -> None:
    """The suffixes a T4 (tu104) offers for the notebook's base metrics, for the CPU suite (ncu needs no GPU)."""
    text = NOTEBOOK.read_text().replace('\\"', '"')
    names = {"gpu__time_duration.sum", *re.findall(r"[\"']([a-z0-9]+__[a-z0-9_.]+)[\"']", text)}
    bases = ",".join(sorted({name.split(".")[0] for name in names}))
    query = ["--query-metrics-mode", "suffix", "--chip", "tu104", "--metrics", bases]
    listed = subprocess.run([ncu, *query], capture_output=True, text=True)
    failed = f"# the query failed (exit {listed.returncode}): {listed.stderr.strip()}\n" if listed.returncode else ""
    (out / "tu104_metric_suffixes.txt").write_text(f"# `ncu {' '.join(query)}`\n{failed}{listed.stdout}")


class LaunchError(RuntimeError):
    """Launch mode cannot go on; the message says why and what to do."""


def nsight_attach_command(launch_ncu, report_path, metrics, cache_control, clock_control, replay_mode, verbosity):
    """The ncu command nsight's own launch_ncu builds for attach mode, captured instead of started; its log path."""
    from nsight.collection import ncu

    captured = []
    capture = types.SimpleNamespace(Popen=lambda command, *_, **__: captured.append(command))
    saved, ncu.subprocess = ncu.subprocess, capture
    try:
        _, _, log_path = launch_ncu(report_path, metrics, cache_control, clock_control, replay_mode, verbosity)
    finally:
        ncu.subprocess = saved
    (command,) = captured  # nsight-python 1.1.0 starts one ncu a call
    return list(command), log_path


def launch_command(attach: list[str], ncu: str, program: list[str]) -> list[str]:
    flags = list(attach[1:])
    for option, value in ATTACH_ONLY_OPTIONS.items():
        if option not in flags or value not in (None, flags[flags.index(option) + 1]):
            raise LaunchError(f"nsight's ncu command has no '{option} {value or '...'}': {' '.join(attach)}")
        del flags[flags.index(option) : flags.index(option) + 2]
    if "--clock-control" not in flags:
        raise LaunchError(f"nsight's ncu command has no '--clock-control ...': {' '.join(attach)}")
    flags[flags.index("--clock-control") + 1] = RUNNER_CLOCK_CONTROL  # whatever the call asked for
    return [ncu, "--nvtx", *flags, *program]


class InnerDone(BaseException):
    """The inner process profiled its call: stop replaying cells."""


def ncu_run(wait=lambda: 0):  # what collect waits on: the ncu running the inner replay (outer), or nothing (inner)
    return types.SimpleNamespace(wait=wait)


def child_env() -> dict:
    """The child's output folder is the kernel's working folder: the kernel's extraction reads what it writes."""
    env = dict(NSPY_NCU_INIT_AT_IMPORT="0", NSPY_TUTORIAL_OUT=os.getcwd(), MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    return {**os.environ, **env}  # Agg: the kernel's inline backend means nothing in the child


class ProfiledCalls:
    """What NCUCollector.collect calls, each named after what it replaces: the outer starts one ncu a call and
    extracts its report; the inner runs its one target call."""

    def __init__(
        self, work: Path, role: str, target: str | None = None, ncu: str | None = None, out: Path | None = None
    ):
        self.work, self.role, self.target, self.ncu, self.out = work, role, target, ncu, out
        self.key, self.where, self.done = "", (None, None), False  # the call "<section>-<k>"; the running cell
        self.per_section, self.calls, self.original = {}, [], {}  # calls started per section; what each did (outer)

    def log(self, text: str) -> None:  # the outer's: the inner has no `out`
        with open(self.out / "ncu_launch.log", "a") as log:
            log.write(text + "\n")

    # ---- the replacements
    def activate(self, tool):
        from nsight.tools_manager import Tool  # for ncu, nothing to load: ncu launches each call's process

        return None if tool == Tool.NCU else self.original["activate"](tool)

    def begin_profiling(self):
        """In launch mode ncu profiles the NVTX ranges nsight opens: nothing to start or end."""

    end_profiling = begin_profiling

    def launch_ncu(self, report_path, metrics, cache_control, clock_control, replay_mode, verbosity):
        section, cell = self.where
        if section is None:
            raise LaunchError(f"a profiled call from cell {cell!r}, which is in no section of {NOTEBOOK.name}")
        self.per_section[section] = self.per_section.get(section, -1) + 1
        self.key = f"{section}-{self.per_section[section]}"
        options = (cache_control, clock_control, replay_mode, verbosity)
        where = os.path.abspath(report_path)  # ncu and the child run in other folders; the kernel reads it here
        attach, log_path = nsight_attach_command(self.original["launch_ncu"], where, metrics, *options)
        if self.role == "inner":
            return ncu_run(), report_path, log_path
        program = [sys.executable, str(INNER), "--work", str(self.work), "--call", self.key]
        command = launch_command(attach, self.ncu, program)
        call = {"call": self.key, "cell": cell, "cache_control": cache_control, "clock_control": clock_control}
        call.update(ncu_clock_control=RUNNER_CLOCK_CONTROL, report=report_path, command=" ".join(command))
        self.calls.append(call)
        output = self.work / f"{self.key}.out"
        with open(output, "w") as sink:
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=child_env())
        started = time.perf_counter()
        return ncu_run(lambda: self.finished(call, process, output, started)), report_path, log_path

    def run_profile_session(self, func, configs, runs, *args, **kwargs):
        if self.role == "outer":  # the inner process runs it, under ncu
            self.log(f"call {self.key}: {func.__name__}, runs={runs}, {len(list(configs))} configs")
        elif self.key == self.target:  # earlier calls are served from the outer's extraction
            self.original["run_profile_session"](func, configs, runs, *args, **kwargs)
            import torch

            torch.cuda.synchronize()
            self.done = True  # a %%needs_ncu cell re-raises InnerDone as its own failure: this flag says it ran
            raise InnerDone()

    def finished(self, call: dict, process, output: Path, started: float) -> int:
        """The outer's wait for ncu: its exit, wall time and the end of what it printed."""
        try:
            returncode = process.wait(timeout=NCU_CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a hung ncu or inner process: stop it, and say which call it was
            process.kill()
            process.wait()
            returncode = None
        tail = output.read_text(errors="replace").splitlines()[-15:]
        call.update(ncu_wall_s=round(time.perf_counter() - started, 2), ncu_exit=returncode, output_tail=tail)
        self.log(f"call {call['call']}: ncu exit {returncode} in {call['ncu_wall_s']} s")
        (self.out / "ncu_launch_calls.json").write_text(json.dumps(self.calls, indent=1) + "\n")
        if returncode != 0:  # else the report exists, or nsight's extraction says it does not
            failed = f"failed: exit {returncode}" if returncode else f"did not finish within {NCU_CALL_TIMEOUT_S} s"
            raise LaunchError(f"ncu for call {call['call']} (cell {call['cell']}) {failed}\n" + "\n".join(tail))
        return returncode

    def extract_df_from_report(self, report_path, metrics, configs, iterations, func, *args, **kwargs):
        stored = self.work / f"{self.key}.pkl"  # scratch between outer and inner, never kept
        if self.role == "inner":  # a call before the target: what the outer extracted
            kind, payload = pickle.loads(stored.read_bytes())
            if kind == "error":
                raise payload
            return payload
        try:
            raw = self.original["extract_df_from_report"](
                report_path, metrics, configs, iterations, func, *args, **kwargs
            )
        except Exception as error:  # what nsight's extraction raised, e.g. the several-kernels RuntimeError
            stored.write_bytes(pickle.dumps(("error", error)))
            raise
        stored.write_bytes(pickle.dumps(("frame", raw)))
        return raw


class NcuGuard:
    """subprocess.Popen in the kernel: no profiling ncu without `--clock-control none`."""

    def __init__(self, ncu: str):
        self.ncu, self.saved = ncu, subprocess.Popen

    def check(self, args) -> None:
        """Refuse an ncu command that profiles without `--clock-control none` (ncu's default is base clocks)."""
        argv = [str(arg) for arg in (args if isinstance(args, (list, tuple)) else [args])]
        if argv and (Path(argv[0]).name == "ncu" or argv[0] == self.ncu) and not QUERY_OPTIONS & set(argv):
            at = argv.index("--clock-control") + 1 if "--clock-control" in argv else len(argv)
            if argv[at : at + 1] != [RUNNER_CLOCK_CONTROL]:
                raise LaunchError(
                    f"refusing to start ncu without --clock-control {RUNNER_CLOCK_CONTROL} (the runner is shared; "
                    f"its clocks stay as they are): {' '.join(argv)}"
                )

    def install(self):
        guard = self

        class GuardedPopen(self.saved):
            def __init__(self, args, *rest, **kwargs):
                guard.check(args)
                super().__init__(args, *rest, **kwargs)

        subprocess.Popen = GuardedPopen


# ---------------------------------------------------------------- the inner: section N's cells up to call k
def load_cells(path: Path = NOTEBOOK) -> list[dict]:
    cells = json.loads(Path(path).read_text())["cells"]
    return [{"id": cell.get("id"), "type": cell["cell_type"], "source": "".join(cell["source"])} for cell in cells]


def binds_at_top(source: str, names) -> bool:
    """Whether a cell defines or assigns one of `names` at its top level (a cell with magics binds none)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    defined = {node.name for node in body if isinstance(node, ast.FunctionDef)}
    assigned = {t.id for node in body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    return bool((defined | assigned) & set(names))


def inner_cell_ids(cells: list[dict], section: int) -> list[str]:
    """What the inner replays for `section`, in notebook order: the harness, SECTION_ONE_REPLAYED, the cells that bind
    SHARED_NAMES, then the section's define and run cells (SECTION_PLAN)."""
    code = [cell for cell in cells if cell["type"] == "code" and section_of(cell["id"]) not in (None, 1)]
    shared = [cell["id"] for cell in code if binds_at_top(cell["source"], SHARED_NAMES)]
    plan = SECTION_PLAN.get(section, {})
    own = {cell_id for role in ("define", "gpu_define", "run") for cell_id in plan.get(role, ())} - set(NOT_UNDER_NCU)
    first = [SECTION_ONE_CELLS[role] for role in SECTION_ONE_REPLAYED]
    ids = [HARNESS, SETUP_HELPERS, *first] + [cell["id"] for cell in code if cell["id"] in set(shared) | own]
    if missing := own - set(ids):
        raise LaunchError(f"SECTION_PLAN in plumbing/cells.py names cells {sorted(missing)} that {NOTEBOOK.name} lacks")
    return list(dict.fromkeys(ids))


def load_nsight(calls: ProfiledCalls) -> None:
    """Import nsight with nothing loaded, refuse a version other than the one whose internals launch mode patches,
    patch it and make Nsight Compute its tool."""
    os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"
    import nsight
    from nsight import tools_manager
    from nsight.collection import ncu

    if nsight.__version__ != NSIGHT_VERSION:
        raise LaunchError(
            f"nsight-python {nsight.__version__} is installed; launch mode patches the internals of {NSIGHT_VERSION}. "
            f"Install nsight-python=={NSIGHT_VERSION} (requirements.txt), or port PATCHED_FUNCTIONS and ProfiledCalls "
            "(recording/ncu_launch.py) to it"
        )
    if ncu.injection_load_error is not None:
        raise LaunchError(
            f"nsight tried to load Nsight Compute when it was imported ({ncu.injection_load_error}); launch mode "
            "needs NSPY_NCU_INIT_AT_IMPORT=0 before nsight is imported"
        )
    for module_name, name in PATCHED_FUNCTIONS:  # calls' methods replace nsight's functions of the same name
        module = importlib.import_module(module_name)
        calls.original[name] = getattr(module, name)
        setattr(module, name, getattr(calls, name))
    tools_manager._active_tool = tools_manager.Tool.NCU
