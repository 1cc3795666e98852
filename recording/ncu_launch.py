"""Nsight Compute launch mode for record_ncu.py (outer) and ncu_inner.py (inner), its neighbours: the nsight functions
patched (ProfiledCalls), the ncu commands, the replay of the notebook's cells, and NcuGuard (`--clock-control none`)."""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import subprocess
import sys
import time
import types
from pathlib import Path

import recordings
from recordings import ROOT, RecorderError, encode, log_line

from plumbing.cells import NOT_UNDER_NCU, SECTION_ONE_NAMES, SETUP_HELPERS

NSIGHT_VERSION = "1.1.0"
INNER = Path(__file__).resolve().parent / "ncu_inner.py"
# The GPU runner is shared: its clocks stay as they are, so every ncu there gets `--clock-control none`. A call that
# asks for another (section 4's clock_control="base") runs with it too, and its call notes both (clock_control, what
# the notebook asked; ncu_clock_control, what ncu was given): the measured SM clock then shows that nothing was locked.
RUNNER_CLOCK_CONTROL = "none"
NCU_CALL_TIMEOUT_S = 300  # one profiled call under ncu, the replay of its section's cells included


# NCUCollector.collect runs unchanged; these functions it calls are replaced (module, name, parameters relied on).
PATCHED_FUNCTIONS = (
    ("nsight.tools_manager", "activate", ["tool"]),
    ("nsight.collection.ncu", "begin_profiling", []),
    ("nsight.collection.ncu", "end_profiling", []),
    ("nsight.collection.ncu", "launch_ncu",
     ["report_path", "metrics", "cache_control", "clock_control", "replay_mode", "verbosity"]),
    ("nsight.collection.core", "run_profile_session", ["func", "configs", "runs"]),  # the rest passed on as given
    ("nsight.extraction", "extract_df_from_report", ["report_path", "metrics", "configs", "iterations", "func"]),
)  # fmt: skip
# The names NCUCollector.collect must still use for the patches to take effect (called, or imported inside it).
COLLECT_USES = ("launch_ncu", "begin_profiling", "end_profiling", "run_profile_session", "extract_df_from_report",
                "activate", "get_active_tool")  # fmt: skip
ATTACH_ONLY_OPTIONS = {"--mode": "attach", "--process-id": None}  # dropped: in launch mode ncu starts the process
# Options of an ncu that profiles nothing (it prints its version, lists metrics, or reads a report: s10-details).
QUERY_OPTIONS = {"--version", "--query-metrics", "--query-metrics-mode", "--list-sections", "--list-sets", "--import"}
LAUNCH_MODE = {"active_tool": "none (ncu launch mode: ncu runs the process, nothing attaches)",
               "profiler": "ncu (launch mode, recording/record_ncu.py)"}  # fmt: skip


def check_nsight_internals():
    """Name what moved in the installed nsight-python against what the recorder patches, before anything runs."""
    import nsight
    from nsight.collection import ncu

    problems = []
    for module_name, name, expected in PATCHED_FUNCTIONS:
        function = getattr(importlib.import_module(module_name), name, None)
        takes = list(inspect.signature(function).parameters) if function else []
        if function is None or takes[: len(expected)] != expected:
            problems.append(f"{module_name}.{name} " + (f"takes ({', '.join(takes)}), the recorder expects "
                            f"({', '.join(expected)})" if function else "is gone"))  # fmt: skip
    code = getattr(getattr(getattr(ncu, "NCUCollector", None), "collect", None), "__code__", None)
    used = code.co_names + code.co_varnames if code else ()
    problems += [f"NCUCollector.collect no longer uses {name}" for name in COLLECT_USES if name not in used]
    if problems:
        raise RecorderError(f"nsight-python {nsight.__version__} moved what record_ncu.py patches: "
                            f"{'; '.join(problems)}. Port PATCHED_FUNCTIONS and ProfiledCalls, or install "
                            f"nsight-python=={NSIGHT_VERSION}")  # fmt: skip


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
    if len(captured) != 1:
        raise RecorderError(f"nsight's launch_ncu started {len(captured)} processes, the recorder expects one")
    return list(captured[0]), log_path


def launch_command(attach: list[str], ncu: str, program: list[str]) -> list[str]:
    flags = list(attach[1:])
    for option, value in ATTACH_ONLY_OPTIONS.items():
        if option not in flags or value not in (None, flags[flags.index(option) + 1]):
            raise RecorderError(f"nsight's ncu command has no '{option} {value or '...'}': {' '.join(attach)}")
        del flags[flags.index(option) : flags.index(option) + 2]
    if "--clock-control" not in flags:
        raise RecorderError(f"nsight's ncu command has no '--clock-control ...': {' '.join(attach)}")
    flags[flags.index("--clock-control") + 1] = RUNNER_CLOCK_CONTROL  # whatever the call asked for
    require_runner_clocks(flags)
    return [ncu, "--nvtx", *flags, *program]


def require_runner_clocks(argv: list[str]) -> None:
    """Refuse an ncu command that profiles without `--clock-control none` (ncu's default is base clocks)."""
    at = argv.index("--clock-control") + 1 if "--clock-control" in argv else len(argv)
    if argv[at : at + 1] != [RUNNER_CLOCK_CONTROL]:
        raise RecorderError(f"refusing to start ncu without --clock-control {RUNNER_CLOCK_CONTROL} (the runner is "
                            f"shared; its clocks stay as they are): {' '.join(argv)}")  # fmt: skip


def inner_program(work: Path, key: str) -> list[str]:
    """What ncu runs for profiled call `key` (section-index): ncu_inner.py, replaying that section up to the call."""
    return [sys.executable, str(INNER), "--work", str(work), "--call", key]


class InnerDone(BaseException):
    """The inner process profiled its call: stop replaying cells."""


def ncu_run(wait=lambda: 0):  # what collect waits on: the ncu running the inner replay (outer), or nothing (inner)
    return types.SimpleNamespace(wait=wait)


class ProfiledCalls:
    """The replacements for what NCUCollector.collect calls, each a method named after what it replaces."""

    def __init__(self, work: Path, role: str, target: str | None = None, ncu: str | None = None, log=None):
        self.work, self.role, self.target, self.ncu, self.log = work, role, target, ncu, log or log_line
        self.key, self.where, self.allowed = "", (None, None), True  # the call "<section>-<k>"; (section, cell id)
        self.per_section, self.calls, self.original = {}, [], {}  # calls started per section; what each did (outer)

    def install(self):
        from nsight.collection import ncu

        if ncu.injection_load_error is not None:
            raise RecorderError(f"nsight tried to load Nsight Compute when it was imported ({ncu.injection_load_error})"
                                "; the recorder needs NSPY_NCU_INIT_AT_IMPORT=0 before nsight is imported")  # fmt: skip
        for module_name, name, _ in PATCHED_FUNCTIONS:
            module = importlib.import_module(module_name)
            self.original[name] = getattr(module, name)
            setattr(module, name, getattr(self, name))

    def uninstall(self):
        for module_name, name, _ in PATCHED_FUNCTIONS:
            if name in self.original:
                setattr(importlib.import_module(module_name), name, self.original.pop(name))

    def shown(self, text: str) -> str:
        """Text for the committed recording: this machine's paths as WORK (scratch folder, maybe in REPO) and REPO."""
        return text.replace(str(self.work), "WORK").replace(str(ROOT), "REPO")

    # ---- the replacements
    def activate(self, tool):
        from nsight.tools_manager import Tool  # for ncu, nothing to load: ncu launched this process

        return None if tool == Tool.NCU else self.original["activate"](tool)

    def begin_profiling(self):
        """In launch mode ncu profiles the NVTX ranges nsight opens: nothing to start or end."""

    end_profiling = begin_profiling

    def launch_ncu(self, report_path, metrics, cache_control, clock_control, replay_mode, verbosity):
        section, cell = self.where
        if not self.allowed:
            raise RecorderError(f"cell {cell!r} called a benchmark, but it is run only for its definitions")
        self.per_section[section] = self.per_section.get(section, -1) + 1
        self.key = f"{section}-{self.per_section[section]}"
        attach, log_path = nsight_attach_command(self.original["launch_ncu"], report_path, metrics, cache_control,
                                                 clock_control, replay_mode, verbosity)  # fmt: skip
        if self.role == "inner":
            return ncu_run(), report_path, log_path
        asked = {"cache_control": cache_control, "clock_control": clock_control}
        self.calls.append(call := {"index": self.key, "section": section, "cell": cell, **asked})
        call["ncu_clock_control"] = RUNNER_CLOCK_CONTROL  # what ncu is given, whatever the call asked for
        command = launch_command(attach, self.ncu, inner_program(self.work, self.key))
        call.update(metrics=list(metrics), replay_mode=replay_mode, report=os.path.relpath(report_path, self.work))
        call.update(command=self.shown(" ".join(command)), nsight_attach_command=self.shown(" ".join(attach)))
        output = self.work / "calls" / f"{self.key}.out"
        with open(output, "w") as sink:
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=child_env(self.work))
        started = time.perf_counter()
        return ncu_run(lambda: self.finished(call, process, output, started)), report_path, log_path

    def run_profile_session(self, func, configs, runs, *args, **kwargs):
        if self.role == "outer":  # the inner process runs it, under ncu
            configs = [tuple(c) if isinstance(c, (list, tuple)) else c for c in configs]
            self.calls[-1].update(benchmark=func.__name__, runs=runs, configs=encode(configs))
            settings = f"cache_control={self.calls[-1]['cache_control']} runs={runs} configs={len(configs)}"
            self.log(f"[record] call {self.key}: {func.__name__} {settings}")
        elif self.key == self.target:  # earlier calls are served from the outer's extraction
            self.original["run_profile_session"](func, configs, runs, *args, **kwargs)
            import torch

            torch.cuda.synchronize()
            raise InnerDone()

    def finished(self, call: dict, process, output: Path, started: float) -> int:
        """The outer's wait for ncu: its exit, wall time and the ends of its and the inner's logs."""
        try:
            returncode = process.wait(timeout=NCU_CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a hung ncu or inner process: stop it, and say which call it was
            process.kill()
            process.wait()
            returncode = None
        call.update(ncu_wall_s=round(time.perf_counter() - started, 2), ncu_exit=returncode)
        logs = (output, self.work / call["report"].replace(".ncu-rep", ".log"))  # the process's output, ncu's log
        ends = [self.shown(p.read_text(errors="replace")).splitlines()[-15:] if p.exists() else [] for p in logs]
        call["process_output_tail"], call["ncu_log_tail"] = ends
        self.log(f"[record]   ncu exit {returncode} in {call['ncu_wall_s']} s")
        if returncode != 0:  # else the report exists, or nsight's extraction says it does not
            failed = f"failed: exit {returncode}" if returncode else f"did not finish within {NCU_CALL_TIMEOUT_S} s"
            raise RecorderError(f"ncu for call {call['index']} ({call.get('benchmark')}, cell {call['cell']}) {failed}"
                                "\n" + "\n".join(call["process_output_tail"] + call["ncu_log_tail"]))  # fmt: skip
        return returncode

    def extract_df_from_report(self, report_path, metrics, configs, iterations, func, *args, **kwargs):
        stored = self.work / "calls" / f"{self.key}.pkl"  # scratch between outer and inner, never committed
        if self.role == "inner":  # a call before the target: what the outer extracted
            kind, payload = pickle.loads(stored.read_bytes())
            if kind == "error":
                raise payload
            return payload
        call = self.calls[-1]
        extract = self.original["extract_df_from_report"]
        try:
            raw = extract(report_path, metrics, configs, iterations, func, *args, **kwargs)
        except Exception as error:  # what nsight's extraction raised, e.g. the several-kernels RuntimeError
            call["error"] = {"type": type(error).__name__, "message": str(error)}
            stored.write_bytes(pickle.dumps(("error", error)))
            self.log(f"[record]   nsight raised {type(error).__name__}: {str(error).splitlines()[0]}")
            raise
        call["raw_frame"] = encode(raw)
        stored.write_bytes(pickle.dumps(("frame", raw)))
        return raw


def child_env(work: Path) -> dict:
    return {**os.environ, "NSPY_NCU_INIT_AT_IMPORT": "0", "NSPY_TUTORIAL_OUT": str(work / "out"), "MPLBACKEND": "Agg",
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


class NcuGuard:
    """subprocess.Popen for the outer process: no profiling ncu without `--clock-control none`; the others counted."""

    def __init__(self, ncu: str):
        self.ncu, self.runs, self.section, self.per_section, self.saved = ncu, [], None, {}, subprocess.Popen

    def check(self, args) -> None:
        argv = [str(arg) for arg in (args if isinstance(args, (list, tuple)) else [args])]
        if argv and (Path(argv[0]).name == "ncu" or argv[0] == self.ncu) and not QUERY_OPTIONS & set(argv):
            require_runner_clocks(argv)
            if str(INNER) not in argv:  # a profiled call's ncu is counted with its call, not here
                self.runs.append(" ".join(argv))
                self.per_section[self.section] = self.per_section.get(self.section, 0) + 1

    def __enter__(self):
        guard = self

        class GuardedPopen(self.saved):
            def __init__(self, args, *rest, **kwargs):
                guard.check(args)
                super().__init__(args, *rest, **kwargs)

        subprocess.Popen = GuardedPopen
        return self

    def __exit__(self, *exc):
        subprocess.Popen = self.saved


def section_one_names(namespace: dict, facts: dict | None = None) -> None:
    """Section 1's names from the GPU machine's facts (made by section 1's own functions unless given), `display`."""
    import matplotlib

    matplotlib.use("Agg")
    import nsight  # NSPY_NCU_INIT_AT_IMPORT=0: nothing is loaded; ncu runs this process from outside
    import numpy as np
    import pandas as pd
    from IPython.display import display

    torch = None if facts else importlib.import_module("torch")
    facts = facts or namespace["environment_facts"](torch, nsight, True, "", namespace.get("LIBCUPTI"))
    namespace["ENVIRONMENT"].update({**facts, **LAUNCH_MODE})
    namespace.update(nsight=nsight, torch=torch, pd=pd, np=np, QUIET=nsight.VerbosityLevel.SILENT, display=display)
    namespace.update(USE_NCU=True, CUPTI_REASON="")
    values = namespace["section_one_values"](namespace["ENVIRONMENT"])
    namespace.update(zip(("L2_BYTES", "PEAKS_LABEL", "PEAKS"), values, strict=True))
    if missing := [name for name in SECTION_ONE_NAMES if name not in namespace]:
        raise RecorderError(f"section 1's names {missing} are not made here: update section_one_names")


def inner_plan(cells: list[dict], section: int) -> list[tuple[int | None, str, str]]:
    """What the inner process replays for a call of `section`."""
    steps = recordings.plan(cells, [section])
    return [s for s in steps if s[2] in ("prelude", "define", "gpu_define", "run") and s[1] not in NOT_UNDER_NCU]


def replay(steps, calls: ProfiledCalls, guard: NcuGuard | None = None, log=log_line, recorded=None) -> dict:
    """recordings.execute() in launch mode."""
    namespace = {"__name__": "__main__", "RECORDING": recorded}

    def before(section, cell_id, role):
        calls.where, calls.allowed = (section, cell_id), role == "run"
        if guard:
            guard.section = section

    def after(section, cell_id, role):
        if cell_id == SETUP_HELPERS:  # then section 1's names, before any cell uses them
            section_one_names(namespace)
            calls.install()

    done = recordings.execute(steps, namespace, log, before, after, propagate=calls.role == "inner")
    return {**done, "namespace": namespace, "ncu_runs": dict(guard.per_section) if guard else {}}
