"""The harness module (plumbing/harness.py), imported: output folder, kernel names, datasheet peaks,
SUSPECT figures, section status from verdicts, summary.json and what in it fails a headless run. The notebook's own
cells driving them in a real kernel are in test_plain_jupyter.py.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import types
from pathlib import Path

import nbformat
import pytest
from support import NOTEBOOK, cell_by_id

import plumbing.harness
from plumbing.cells import CUPTI_SECTIONS, NCU_ONLY_SECTIONS, SECTION_COUNT, SECTION_PLAN
from plumbing.executed_run import merge_failures, run_problems


@pytest.fixture
def harness(monkeypatch, tmp_path):
    """A fresh harness (no sections, no figures) writing to tmp_path/out."""
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    return importlib.reload(plumbing.harness)


def test_importing_the_harness_creates_no_folder_and_prints_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NSPY_TUTORIAL_OUT", raising=False)
    importlib.reload(plumbing.harness)
    assert list(tmp_path.iterdir()) == [] and capsys.readouterr().out == "", "only the notebook's cell may act"


def test_output_folder_is_the_setting_else_the_default_folder_under_content_on_colab(harness):
    assert harness.choose_output_dir({"NSPY_TUTORIAL_OUT": "/tmp/custom"}, on_colab=True) == Path("/tmp/custom")
    assert harness.choose_output_dir({}, on_colab=True) == Path("/content", harness.OUTPUT_FOLDER)


def test_output_folder_off_colab_is_the_default_folder_in_the_current_folder(harness, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert harness.choose_output_dir({}, on_colab=False) == tmp_path / harness.OUTPUT_FOLDER


def test_out_prefix_is_a_folder_inside_the_output_folder(harness, tmp_path):
    # out_prefix is defined once, in section 2's first (visible) define cell; run it beside the harness's OUT_DIR
    namespace = {"OUT_DIR": harness.OUT_DIR}
    exec(cell_by_id(nbformat.read(NOTEBOOK, as_version=4), SECTION_PLAN[2]["define"][0]).source, namespace)
    assert namespace["out_prefix"]("s7_fusion") == f"{tmp_path / 'out' / 's7_fusion'}/"


# ---------------------------------------------------------------- kernel names
@pytest.mark.parametrize(
    ("kernel", "short"),
    [
        ("_ZN7cutlass7Kernel2I43cutlass_80_simt_sgemm_256x128_8x4_nn_align1EEvNT_6ParamsE",
         "cutlass_80_simt_sgemm_256x128_8x4_nn_align1"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)",
         "at::native::vectorized_elementwise_kernel"),
        ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ],
)  # fmt: skip
def test_kernel_names_are_shortened_to_what_a_reader_can_use(harness, kernel, short):
    assert harness.short_kernel_name(kernel) == short


def test_long_kernel_names_are_cut_to_fit_a_table(harness):
    shortened = harness.short_kernel_name("sm90_xmma_gemm_" + "x" * 80)
    assert len(shortened) == 48 and shortened.endswith("..."), shortened


# ---------------------------------------------------------------- datasheet peaks and SUSPECT figures
# The names nvidia-smi and torch report for the GPUs the table knows, and the table's label for each.
REPORTED_NAMES = {
    "Tesla T4": "T4",
    "NVIDIA L4": "L4",
    "NVIDIA A100-SXM4-40GB": "A100 40GB SXM",
    "NVIDIA A100-SXM4-80GB": "A100 80GB SXM",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H200": "H200 SXM",
}


@pytest.mark.parametrize("gpu", sorted(REPORTED_NAMES))
def test_each_known_gpu_name_matches_exactly_one_datasheet_entry(harness, gpu):
    matching = [label for pattern, label, _ in harness.GPU_PEAKS if re.search(pattern, gpu)]
    assert matching == [REPORTED_NAMES[gpu]], f"{gpu!r} matches {matching}"
    label, peaks = harness.lookup_peaks(f"  {gpu}\n")
    assert label == REPORTED_NAMES[gpu] and set(peaks) == set(harness.PEAK_NAMES)


@pytest.mark.parametrize(("pattern", "label", "peaks"), plumbing.harness.GPU_PEAKS)
def test_datasheet_peaks_are_dense_figures_in_the_units_the_figures_use(pattern, label, peaks):
    """TFLOP/s and GB/s: a table entry in GFLOP/s or TB/s would make every figure of that GPU SUSPECT."""
    assert 1 <= peaks["fp32_tflops"] < peaks["fp16_tflops"] < 2000, f"{label}: fp16 tensor above fp32, in TFLOP/s"
    assert 100 <= peaks["dram_gbs"] < 10_000, f"{label}: DRAM bandwidth in GB/s"


@pytest.mark.parametrize("gpu", ["NVIDIA GeForce RTX 4090", "NVIDIA H200 NVL", "NVIDIA H100 PCIe", "", None])
def test_unknown_gpus_get_no_peaks_rather_than_another_gpus(harness, gpu):
    assert harness.lookup_peaks(gpu) == (None, None)


def test_figures_on_an_unknown_gpu_read_na_and_are_not_judged(harness):
    harness.ENVIRONMENT["gpu"] = "NVIDIA GeForce RTX 4090"
    figure = harness.record_figure(5, "x", 50.0, "TFLOP/s", "fp16_tflops")
    assert figure["check"] == "unchecked" and figure["pct_of_peak"] is None
    assert "n/a" in harness.describe_figure(figure)


@pytest.mark.parametrize(
    ("pct", "check"),
    [(4.9, "SUSPECT"), (5.0, "ok"), (50.0, "ok"), (100.0, "ok"), (100.1, "SUSPECT"), (math.nan, "SUSPECT")],
)
def test_suspect_bounds_on_both_sides(harness, pct, check):
    harness.ENVIRONMENT["gpu"] = "Tesla T4"  # 320 GB/s DRAM: value = pct% of it
    figure = harness.record_figure(6, "bound check", 3.2 * pct, "GB/s", "dram_gbs")
    assert figure["check"] == check, f"{pct}% of peak was judged {figure['check']}"


def test_a_suspect_figure_is_flagged_where_the_reader_sees_it(harness):
    harness.ENVIRONMENT["gpu"] = "NVIDIA H200"
    figure = harness.record_figure(2, "fp32 matmul 2048", 0.05, "TFLOP/s", "fp32_tflops")  # 1000x too small
    assert figure["check"] == "SUSPECT" and harness.describe_figure(figure).endswith("<- SUSPECT")


# ---------------------------------------------------------------- sections and summary.json
def test_summary_json_records_environment_sections_figures_and_times(harness, tmp_path, capsys):
    harness.prepare_output_dir(harness.OUT_DIR)  # what the notebook's harness cell does
    harness.ENVIRONMENT.update(gpu="NVIDIA H200", profiler="cupti")
    harness.verdict(1, "ready")
    harness.check_figure(5, "fp16 matmul 4096", 791.2, "TFLOP/s", "fp16_tflops")
    harness.verdict(5, "swept")
    harness.report_summary()
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["environment"]["gpu"] == "NVIDIA H200"
    assert [s["number"] for s in written["sections"]] == list(range(1, SECTION_COUNT + 1))
    assert written["sections"][0]["headline"] == "ready" and isinstance(written["sections"][4]["seconds"], float)
    assert written["figures"][0]["pct_of_peak"] == 80.0 and written["figures"][0]["check"] == "ok"
    assert written["counts"] == {"ok": 2, "SKIPPED": 5, "FAILED": 0, "NOT RUN": 3}
    assert " 5. ok       swept" in capsys.readouterr().out, "report_summary prints each section's status and headline"


def test_a_section_without_a_verdict_is_not_run_or_under_cupti_skipped_if_it_needs_nsight_compute(harness):
    assert harness.section_entry(4)["status"] == "NOT RUN", "without a verdict (and no CUPTI choice) it is NOT RUN"
    harness.ENVIRONMENT["profiler"] = "cupti"
    entries = {n: harness.section_entry(n) for n in range(2, SECTION_COUNT + 1)}
    skipped = {n for n, entry in entries.items() if entry["status"] == "SKIPPED" and entry["environment_limit"]}
    assert skipped == NCU_ONLY_SECTIONS, "under CUPTI exactly the NCU-only sections are SKIPPED, an environment limit"
    not_run = {n for n, entry in entries.items() if entry["status"] == "NOT RUN"}
    assert not_run == CUPTI_SECTIONS, "under CUPTI a section that runs on CUPTI but gave no verdict is NOT RUN"


def test_verdicts_in_a_row_join_the_headline_and_coming_back_to_a_section_starts_it_afresh(harness, capsys):
    harness.ENVIRONMENT["gpu"] = "NVIDIA H200"
    for finding in ("the short add scattered most", "the host clock added the launch") * 2:
        harness.verdict(3, finding)
    assert capsys.readouterr().out.splitlines()[-1] == "On this NVIDIA H200: the host clock added the launch"
    assert harness.section_entry(3)["headline"] == "the short add scattered most; the host clock added the launch", (
        "verdicts of one section in a row join its headline with '; ', each finding once"
    )
    harness.verdict(5, "swept")
    harness.verdict(3, "run again")
    assert harness.section_entry(3)["headline"] == "run again", "a verdict after another section's starts it afresh"


def test_a_sections_seconds_run_from_the_verdict_before_it(harness, monkeypatch):
    now = [100.0]  # the harness cell ran at 100 s
    monkeypatch.setattr(harness, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    harness.CLOCK["at"] = now[0]
    for now[0], number, finding in [(103.0, 1, "ready"), (110.0, 2, "first"), (111.0, 2, "again"), (120.0, 3, "x")]:
        harness.verdict(number, finding)
    seconds = {n: harness.section_entry(n)["seconds"] for n in (1, 2, 3)}
    assert seconds == {1: 3.0, 2: 8.0, 3: 9.0}, "a section's time runs from the previous verdict to its last one"
    assert harness.build_summary()["total_seconds"] == 20.0


def test_a_failed_or_not_run_section_or_a_suspect_figure_fails_the_run_and_a_skipped_section_does_not(harness):
    harness.ENVIRONMENT.update(gpu="Tesla T4", profiler="cupti")
    for number in {1} | CUPTI_SECTIONS - {8}:
        harness.verdict(number, "done")
    harness.record_figure(3, "add", 900.0, "GB/s", "dram_gbs")  # above the T4's 320 GB/s
    error = {"output_type": "error", "ename": "ValueError", "evalue": "bad"}
    cells = [{"cell_type": "code", "id": SECTION_PLAN[5]["run"][0], "outputs": [error]}]
    merged = merge_failures(harness.build_summary(), {"cells": cells})
    assert run_problems(merged) == [
        f"section 5 FAILED: ValueError: bad (cell {cells[0]['id']})",
        "section 8 NOT RUN: its verdict cell did not run",
        "SUSPECT figure in section 3: add = 900.0 GB/s (281.2% of peak 320.0)",
    ], "a FAILED or NOT RUN section and a SUSPECT figure fail the run; SKIPPED sections under CUPTI do not"
    assert merged["suspect_figures"] == 1 and merged["counts"]["SKIPPED"] == len(NCU_ONLY_SECTIONS)


def test_a_figure_recorded_twice_in_one_run_is_kept_once_with_its_last_value(harness):
    harness.ENVIRONMENT["gpu"] = "NVIDIA H200"
    harness.record_figure(6, "add", 4000.0, "GB/s", "dram_gbs")
    harness.record_figure(6, "add", 4100.0, "GB/s", "dram_gbs")
    assert [figure["value"] for figure in harness.FIGURES] == [4100.0]
