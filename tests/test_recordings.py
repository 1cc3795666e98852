"""recording/recordings.py: a cell run, values <-> JSON, merging a partial recording, a section's cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import record_ncu
import recordings
from support import ROOT, RUN, WITHOUT_MODULES

from plumbing.cells import HARNESS


def test_a_cell_run_keeps_its_source_what_it_printed_the_value_it_showed_and_the_data_it_bound():
    namespace: dict = {"__name__": "__main__", "kept": 1}
    source = "import math\nprint('hello')\ntable = {'n': [1, 2]}\nkept = kept\nscale = lambda x: 2 * x\nlen(table['n'])"
    run = recordings.run_cell(namespace, source, "s2-demo", echo=False)
    assert (run["source"], run["output"]) == (source, "hello\n2\n"), "what it printed, then its last line's value"
    assert run["variables"] == {"table": {"n": [1, 2]}}, "only data it bound or rebound: no modules, functions"


def test_frames_with_an_index_and_series_survive_the_json_round_trip():
    import pandas as pd

    table = pd.DataFrame({"fp32": [1.5, 2.5], "fp16": [3.0, 4.0]}, index=pd.Index([512, 1024], name="n"))
    table.columns.name = "Annotation"
    row = pd.Series({"AvgValue": 1.5e5, "Kernel": "ampere_sgemm", "NumRuns": 10}, name=0)
    plain = pd.DataFrame({"n": [1, 2], "Unit": ["ns", None]})
    back = recordings.decode(json.loads(json.dumps(recordings.encode({(1, "t"): table, "r": (row,), "p": plain}))))
    pd.testing.assert_frame_equal(back[(1, "t")], table)
    pd.testing.assert_series_equal(back["r"][0], row)
    pd.testing.assert_frame_equal(back["p"], plain)


def _recording(sections: dict, commit: str, setting: str) -> dict:
    return {"format": recordings.FORMAT, "sections": {str(n): {"notebook_commit": commit} for n in sections},
            "cells": {HARNESS: {"section": None, "source": commit},
                      **{cell: {"section": n, "source": commit} for n, cell in sections.items()}},
            "calls": [{"section": n, "cell": cell} for n, cell in sections.items()],
            "figures": recordings.encode([{"section": n, "value": commit} for n in sections]),
            "define_values": {setting: commit, "OTHER_SETTING": commit} if commit == "old" else {}}  # fmt: skip


def test_recording_some_sections_replaces_theirs_and_keeps_the_others_as_they_were(tmp_path):
    setting = next(iter(recordings.benchmark_setting_names(recordings.load_cells(), [3])))
    recordings.write_recording(tmp_path, _recording({n: RUN[n] for n in (2, 3)}, "old", setting), [2, 3])
    recordings.write_recording(tmp_path, _recording({3: RUN[3]}, "new", setting), [3])
    merged = json.loads((tmp_path / "recording.json").read_text())
    assert {n: info["notebook_commit"] for n, info in merged["sections"].items()} == {"2": "old", "3": "new"}
    assert [(c, e["source"]) for c, e in merged["cells"].items()] == [
        (HARNESS, "new"),
        (RUN[2], "old"),
        (RUN[3], "new"),
    ]
    assert [(call["section"], call["cell"]) for call in merged["calls"]] == [(2, RUN[2]), (3, RUN[3])]
    assert [(f["section"], f["value"]) for f in recordings.decode(merged["figures"])] == [(2, "old"), (3, "new")]
    assert merged["define_values"] == {"OTHER_SETTING": "old"}, f"section 3's old {setting!r} must go"


def test_a_sections_cost_counts_the_ncu_processes_it_started_not_the_calls_served_from_elsewhere():
    calls = [{"section": 4, "ncu_wall_s": 9.5}, {"section": 4, "served_from": {"label": "older"}, "ncu_wall_s": 99.0},
             {"section": 6, "ncu_wall_s": 5.0}]  # fmt: skip
    cost = record_ncu.section_cost(4, calls, guard_runs=1, wall_s=12.345)
    kept = {key: cost[key] for key in ("wall_s", "ncu_processes", "profiled_calls", "ncu_wall_s")}
    assert kept == {"wall_s": 12.35, "ncu_processes": 2, "profiled_calls": 1, "ncu_wall_s": 9.5}, cost


def test_a_python_without_what_the_cells_import_is_named_before_anything_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MODULES.format(absent=("IPython",)), str(ROOT / "recording/record_ncu.py"),
         "--dest", str(tmp_path / "dest")],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "NSPY_RECORD_WORK": str(tmp_path / "work")},
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "lacks IPython" in done.stderr and "scripts/setup_gpu_runner" in done.stderr, done.stderr
    assert not (tmp_path / "dest").exists() and not (tmp_path / "work").exists(), "nothing may be written"


def test_the_recorded_commit_is_the_one_the_recorder_is_told_else_the_clones_head(monkeypatch):
    monkeypatch.setenv("NSPY_RECORD_COMMIT", "0123456789abcdef0123456789abcdef01234567")  # the runner has no .git
    assert recordings.notebook_commit() == "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.delenv("NSPY_RECORD_COMMIT")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert recordings.notebook_commit() == (head or "unknown")


def test_the_executor_stops_a_failing_section_and_those_that_read_it_and_everything_when_a_shared_cell_fails(
    monkeypatch,
):
    sources = {"shared": "x = 1", "bad": "print('half')\n1 / 0", "reader": "y = 2", "other": "z = 3"}
    monkeypatch.setattr(recordings, "source_to_run", lambda cells, cell_id, role: sources[cell_id])
    monkeypatch.setattr(recordings, "SECTION_DEPENDENCY", {9: (5,)})  # none reads another today: say 9 does
    steps = [(None, "shared", "prelude"), (5, "bad", "run"), (9, "reader", "define"), (2, "other", "run")]
    done = recordings.execute(steps, {}, log=lambda *_: None)
    assert done["failed"] == {5: "bad", 9: "bad (section 5, which it reads)"}, "9 reads 5 (as patched)"
    assert list(done["runs"]) == ["shared", "bad", "other"] and done["runs"]["other"]["variables"] == {"z": 3}
    assert done["runs"]["bad"]["output"].startswith("half\nFAILED") and "ZeroDivision" in done["runs"]["bad"]["output"]
    stopped = recordings.execute([(None, "bad", "prelude"), (2, "other", "run")], {}, log=lambda *_: None)
    assert stopped["failed"] == {None: "bad"} and "other" not in stopped["runs"], "a failing shared cell stops all"
    with pytest.raises(ZeroDivisionError):  # the inner process under ncu: the outer reports it from ncu's output
        recordings.execute(steps, {}, log=lambda *_: None, propagate=True)


def test_a_setting_holding_a_function_matches_its_recording_made_in_another_process():
    recorded = {"define_values": {"COLLECTORS": [{"__tuple__": ["sm", {"__repr__": "<function <lambda> at 0x7f0>"}]}]}}
    namespace = {"COLLECTORS": [("sm", eval("lambda *_: 1"))]}  # a cell's lambda, at another address now
    assert recordings.settings_older_than(recorded, namespace, ["COLLECTORS"]) == [], "addresses are not settings"
    namespace["COLLECTORS"] = [("clock", eval("lambda *_: 1"))]
    assert recordings.settings_older_than(recorded, namespace, ["COLLECTORS"]) == ["COLLECTORS"]


def test_a_setting_the_recording_lacks_or_a_changed_one_makes_it_older_than_the_notebook():
    namespace = {"RUNS": 5, "SIZES": [1, 2], "ADDED": 3, "helper": len, "np": recordings}
    recorded = {"define_values": recordings.setting_values(namespace, ["RUNS", "SIZES"])}
    names = list(namespace)
    assert recordings.settings_older_than(recorded, namespace, names) == ["ADDED"], "a new setting must be stale"
    namespace["SIZES"] = [1, 2, 3]
    assert recordings.settings_older_than(recorded, namespace, names) == ["ADDED", "SIZES"], "a changed one too"
    assert sorted(recordings.setting_values(namespace, names)) == ["ADDED", "RUNS", "SIZES"], "functions, modules: no"


def test_a_cupti_childs_program_compares_equal_across_machines_but_not_across_benchmarks(monkeypatch):
    from plumbing import setup_helpers

    benchmark = "import nsight\ndef timed(folder, n):\n    return run(n, runs=5)\n"
    here, there = (f"import ctypes, glob, os, sys\nsys.path.insert(0, {path!r})\n"
                   f"ctypes.CDLL(glob.glob({path!r} + '/x.so')[0], mode=os.RTLD_GLOBAL)\n"
                   for path in ("/work/a/cupti13", "/home/b/.cache/cupti13"))  # fmt: skip
    assert recordings.comparable(here + benchmark) == recordings.comparable(there + benchmark), (
        "section 9's child loads each machine's CUPTI set from its own folder: that is no benchmark setting"
    )
    assert recordings.comparable(setup_helpers.CUPTI_PRELOAD + benchmark) == recordings.comparable(here + benchmark)
    changed = benchmark.replace("runs=5", "runs=6")
    assert recordings.comparable(here + benchmark) != recordings.comparable(here + changed), (
        "a change to the child's benchmark after its first lines must make the recording stale"
    )
