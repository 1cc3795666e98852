"""plumbing/harness.py: output folder, kernel names, peaks, SUSPECT figures, units, verdicts and the summary."""

import importlib
import json
import math
import types
from pathlib import Path

import pytest

import plumbing.harness
from plumbing.cells import NCU_ONLY_SECTIONS, SECTION_COUNT
from plumbing.executed_run import STATUSES


@pytest.fixture
def harness(monkeypatch, tmp_path):
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    return importlib.reload(plumbing.harness)


def test_importing_the_harness_creates_no_folder_and_prints_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path), monkeypatch.delenv("NSPY_TUTORIAL_OUT", raising=False)
    importlib.reload(plumbing.harness)
    assert list(tmp_path.iterdir()) == [] and capsys.readouterr().out == "", "only the notebook's cell may act"


def test_the_output_folder_is_the_setting_else_under_content_on_colab_else_here(harness, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert harness.choose_output_dir({"NSPY_TUTORIAL_OUT": "/tmp/custom"}, on_colab=True) == Path("/tmp/custom")
    assert harness.choose_output_dir({}, on_colab=True) == Path("/content", harness.OUTPUT_FOLDER)
    assert harness.choose_output_dir({}, on_colab=False) == tmp_path / harness.OUTPUT_FOLDER


DATASHEETS = {  # the name torch reports: (label, fp32 TFLOP/s, fp16 tensor TFLOP/s, DRAM GB/s), dense figures
    "Tesla T4": ("T4", 8.1, 65.0, 320.0), "NVIDIA L4": ("L4", 30.3, 121.0, 300.0),
    "NVIDIA A100-SXM4-40GB": ("A100 40GB SXM", 19.5, 312.0, 1555.0),
    "NVIDIA A100-SXM4-80GB": ("A100 80GB SXM", 19.5, 312.0, 2039.0),
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 67.0, 989.0, 3350.0), "NVIDIA H200": ("H200 SXM", 67.0, 989.0, 4800.0),
    **dict.fromkeys(["NVIDIA GeForce RTX 4090", "NVIDIA H200 NVL", "NVIDIA H100 PCIe", "", None], (None,)),
}  # fmt: skip


@pytest.mark.parametrize("gpu", DATASHEETS)
def test_a_gpu_name_gets_its_own_datasheet_peaks_or_none(harness, gpu):
    label, peaks = harness.lookup_peaks(f"  {gpu}\n" if gpu else gpu)
    assert label == DATASHEETS[gpu][0], f"{gpu!r} got the datasheet of {label}: check GPU_PEAKS' patterns"
    got = (label, peaks["fp32_tflops"], peaks["fp16_tflops"], peaks["dram_gbs"]) if peaks else (None,)
    assert got == DATASHEETS[gpu] and (peaks is None or set(peaks) == set(harness.PEAK_NAMES)), f"{gpu}: {peaks}"


@pytest.mark.parametrize(("pct", "check"), [(4.9, "SUSPECT"), (5.0, "ok"), (100.0, "ok"), (100.1, "SUSPECT"),
                                            (math.nan, "SUSPECT")])  # fmt: skip
def test_a_figure_outside_5_to_100_percent_of_its_peak_is_suspect(harness, pct, check):
    harness.ENVIRONMENT["gpu"] = "Tesla T4"  # 320 GB/s DRAM: value = pct% of it
    assert harness.record_figure(6, "bound check", 3.2 * pct, "GB/s", "dram_gbs")["check"] == check


@pytest.mark.parametrize(
    ("gpu", "args", "printed"),
    [("NVIDIA H200", (5, "fp16 4096", 791.2, "TFLOP/s", "fp16_tflops"),
      "fp16 4096: 791.2 TFLOP/s = 80.0% of the H200 SXM fp16 tensor peak (989)"),
     ("NVIDIA H200", (2, "fp32 2048", 0.05, "TFLOP/s", "fp32_tflops"),
      "fp32 2048: 0.1 TFLOP/s = 0.1% of the H200 SXM fp32 peak (67)  <- SUSPECT"),
     ("Tesla T4", (3, "add", 160.0, "GB/s", "dram_gbs"), "add: 160.0 GB/s = 50.0% of the T4 DRAM peak (320)"),
     ("NVIDIA GeForce RTX 4090", (5, "x", 50.0, "TFLOP/s", "fp16_tflops"), "x: 50.0 TFLOP/s (peak n/a")],
)  # fmt: skip
def test_a_checked_figure_prints_its_value_against_its_own_peak_and_is_kept_once(harness, capsys, gpu, args, printed):
    harness.ENVIRONMENT["gpu"] = gpu
    harness.check_figure(*args[:2], 1.0, *args[3:])
    harness.check_figure(*args)
    assert capsys.readouterr().out.splitlines()[-1].startswith(printed)
    assert [figure["value"] for figure in harness.FIGURES] == [round(args[2], 3)], "a figure recorded again replaces"
    check = "SUSPECT" if "SUSPECT" in printed else "unchecked" if "n/a" in printed else "ok"
    assert harness.FIGURES[0]["check"] == check, "a GPU without a datasheet entry leaves its figures unchecked"


def test_the_summary_writes_and_prints_each_sections_own_status_and_headline(harness, tmp_path, capsys):
    harness.prepare_output_dir(harness.OUT_DIR)  # what the notebook's harness cell does
    assert harness.section_entry(4)["status"] == "NOT RUN", "without a verdict (and no CUPTI choice) it is NOT RUN"
    harness.ENVIRONMENT.update(gpu="NVIDIA H200", profiler="cupti")
    harness.verdict(1, "ready")
    harness.check_figure(5, "fp16 matmul 4096", 791.2, "TFLOP/s", "fp16_tflops")
    harness.verdict(5, "swept")
    harness.report_summary()
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["environment"]["gpu"] == "NVIDIA H200" and written["figures"][0]["pct_of_peak"] == 80.0
    statuses = {s["number"]: (s["status"], s["environment_limit"]) for s in written["sections"]}
    expected = {n: ("ok", False) if n in (1, 5) else ("SKIPPED", True) if n in NCU_ONLY_SECTIONS
                else ("NOT RUN", False) for n in range(1, SECTION_COUNT + 1)}  # fmt: skip
    assert statuses == expected, "under CUPTI: SKIPPED (an environment limit) if it needs ncu, else NOT RUN"
    assert written["counts"] == {key: [s for s, _ in statuses.values()].count(key) for key in STATUSES}, "counts"
    table = harness.summary_table(written)
    for s in written["sections"]:  # each row as summary.json has it: status, and why where it is not ok
        row = table.loc[s["number"]]
        assert (row.status, row["why not ok"]) == (s["status"], "" if s["status"] == "ok" else s["reason"]), row
    assert table.loc[5, "figures"].startswith("fp16 matmul 4096: 791.2 TFLOP/s = 80.0% of the H200 SXM"), table
    assert "2 sections ok" in capsys.readouterr().out, "the summary starts with how many sections are ok"


def test_verdicts_in_a_row_join_the_headline_and_time_the_section_from_the_one_before(harness, capsys, monkeypatch):
    now = [100.0]  # the harness cell ran at 100 s
    monkeypatch.setattr(harness, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    harness.CLOCK["at"], harness.ENVIRONMENT["gpu"] = now[0], "NVIDIA H200"
    steps = [(103.0, 1, "ready"), (110.0, 2, "the add scattered"), (110.5, 2, "the clock added the launch"),
             (110.7, 2, "the add scattered"), (111.0, 2, "the clock added the launch"), (120.0, 3, "x")]  # fmt: skip
    for now[0], number, finding in steps:
        harness.verdict(number, finding)
    assert capsys.readouterr().out.splitlines()[-1] == "On this NVIDIA H200: x"
    entries = {n: harness.section_entry(n) for n in (1, 2, 3)}
    assert (entries[2]["status"], entries[2]["headline"]) == ("ok", "the add scattered; the clock added the launch")
    assert {n: e["seconds"] for n, e in entries.items()} == {1: 3.0, 2: 8.0, 3: 9.0}, "from the previous verdict"
    assert harness.build_summary()["total_seconds"] == 20.0
    harness.verdict(2, "run again")
    assert harness.section_entry(2)["headline"] == "run again", "a verdict after another section's starts it afresh"
