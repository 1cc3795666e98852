"""The harness module (plumbing/harness.py), imported: output folder, kernel names, datasheet peaks,
SUSPECT figures, section status, summary.json and strict mode. The notebook's own cells driving them in a real
kernel are in test_plain_jupyter.py.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from pathlib import Path

import nbformat
import pytest
from support import NOTEBOOK, cell_by_id

import plumbing.harness
from plumbing.cells import CUPTI_SECTIONS, NCU_ONLY_SECTIONS, SECTION_COUNT


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
    # out_prefix is defined once, in the notebook's visible cell s2-tools; run that cell beside the harness's OUT_DIR
    namespace = {"OUT_DIR": harness.OUT_DIR}
    exec(cell_by_id(nbformat.read(NOTEBOOK, as_version=4), "s2-tools").source, namespace)
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
def test_summary_json_records_environment_sections_figures_and_times(harness, tmp_path):
    harness.ENVIRONMENT.update(gpu="NVIDIA H200", profiler="cupti")
    harness.begin_section(1, "Set up")
    harness.verdict(1, "ready")
    harness.begin_section(4, "Cache", use_ncu=False)
    harness.begin_section(5, "Sweep")
    harness.check_figure(5, "fp16 matmul 4096", 791.2, "TFLOP/s", "fp16_tflops")
    harness.verdict(5, "swept")
    harness.write_summary(strict=True)
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["environment"]["gpu"] == "NVIDIA H200" and written["strict"] is True
    by_number = {s["number"]: s for s in written["sections"]}
    assert sorted(by_number) == list(range(1, SECTION_COUNT + 1))
    assert by_number[1]["status"] == "ok" and by_number[1]["headline"] == "ready"
    assert by_number[4]["status"] == "SKIPPED" and by_number[4]["environment_limit"] is True
    assert by_number[2]["status"] == "NOT RUN", "a section whose cells never ran must not count as ok"
    assert all(isinstance(by_number[n]["seconds"], float) for n in (1, 4, 5))
    assert written["figures"][0]["pct_of_peak"] == 80.0 and written["figures"][0]["check"] == "ok"
    assert written["counts"] == {"ok": 2, "SKIPPED": 1, "FAILED": 0, "NOT RUN": 7}
    assert written["suspect_figures"] == 0 and written["total_seconds"] >= 0


def test_summary_json_counts_the_suspect_figures(harness, tmp_path):
    harness.ENVIRONMENT["gpu"] = "Tesla T4"
    harness.record_figure(3, "add", 900.0, "GB/s", "dram_gbs")  # above the T4's 320 GB/s
    harness.record_figure(5, "fp16", 0.1, "TFLOP/s", "fp16_tflops")  # below the floor
    harness.record_figure(5, "fp32", 4.0, "TFLOP/s", "fp32_tflops")  # ok
    summary, path = harness.write_summary()
    assert json.loads(path.read_text())["suspect_figures"] == 2, "summary.json must count the SUSPECT figures"


def _all_sections(harness, skipped=None, not_finished=None):
    for number in range(1, SECTION_COUNT + 1):
        harness.begin_section(number, f"s{number}", use_ncu=number != skipped)
        if number != not_finished:
            harness.verdict(number, "done")
    return harness.build_summary(strict=True)


def test_strict_mode_raises_when_a_section_did_not_reach_its_last_cell(harness):
    summary = _all_sections(harness, not_finished=6)
    with pytest.raises(RuntimeError, match="section 6 NOT RUN: its verdict cell did not run"):
        harness.enforce_strict_mode(summary, strict=True)
    assert len(harness.enforce_strict_mode(summary, strict=False)) == 1, "non-strict runs only report"


def test_strict_mode_accepts_a_skipped_section(harness):
    assert harness.enforce_strict_mode(_all_sections(harness, skipped=4), strict=True) == []


def test_strict_mode_raises_on_a_suspect_figure(harness):
    summary = _all_sections(harness)
    harness.ENVIRONMENT["gpu"] = "Tesla T4"
    harness.record_figure(6, "x * 2", 900.0, "GB/s", "dram_gbs")
    with pytest.raises(RuntimeError, match="SUSPECT figure in section 6"):
        harness.enforce_strict_mode(harness.build_summary(strict=True), strict=True)
    assert summary["counts"]["ok"] == 10


def test_strict_mode_refuses_sections_that_never_ran(harness):
    harness.begin_section(1, "Set up")
    with pytest.raises(RuntimeError, match="section 2 NOT RUN"):
        harness.enforce_strict_mode(harness.build_summary(strict=True), strict=True)


def test_cupti_banner_names_the_reason_and_the_sections_the_cell_table_says_need_ncu(harness):
    banner = harness.cupti_banner("no ncu here")
    assert "no ncu here" in banner
    on_cupti = next(line for line in banner.splitlines() if "run on CUPTI" in line)
    skipped = next(line for line in banner.splitlines() if "need hardware counters" in line)
    assert [int(n) for n in re.findall(r"\d+", on_cupti)] == sorted(CUPTI_SECTIONS), on_cupti
    assert [int(n) for n in re.findall(r"\d+", skipped)] == sorted(NCU_ONLY_SECTIONS), skipped


# ---------------------------------------------------------------- a section run again
def _figures_of(harness, number):
    return [(figure["name"], figure["check"]) for figure in harness.FIGURES if figure["section"] == number]


def test_a_section_run_again_records_its_figures_once_and_an_old_suspect_is_gone(harness):
    harness.ENVIRONMENT["gpu"] = "NVIDIA H200"
    harness.begin_section(3, "Runs")
    harness.check_figure(3, "copy", 4000.0, "GB/s", "dram_gbs")
    harness.verdict(3, "copied")
    harness.begin_section(5, "Sweep")
    harness.check_figure(5, "fp16 matmul 4096", 0.8, "TFLOP/s", "fp16_tflops")
    harness.check_figure(5, "fp16 matmul 4096", 0.8, "TFLOP/s", "fp16_tflops")
    assert _figures_of(harness, 5) == [("fp16 matmul 4096", "SUSPECT")], "a figure checked again replaces itself"
    harness.begin_section(5, "Sweep")  # the learner fixes the unit and runs the section again
    harness.check_figure(5, "fp16 matmul 4096", 795.0, "TFLOP/s", "fp16_tflops")
    harness.verdict(5, "swept")
    assert _figures_of(harness, 5) == [("fp16 matmul 4096", "ok")], harness.FIGURES
    assert _figures_of(harness, 3) == [("copy", "ok")], "running section 5 again must leave section 3's figures"
    summary = harness.build_summary(strict=True)
    assert summary["suspect_figures"] == 0 and not [p for p in harness.summary_problems(summary) if "SUSPECT" in p]


def test_a_section_started_again_and_stopped_keeps_none_of_its_old_figures(harness):
    harness.ENVIRONMENT["gpu"] = "NVIDIA H200"
    harness.begin_section(5, "Sweep")
    harness.check_figure(5, "fp16 matmul", 795.0, "TFLOP/s", "fp16_tflops")
    harness.verdict(5, "swept")
    harness.begin_section(5, "Sweep")  # its run cell raises this time: the verdict cell never runs
    assert _figures_of(harness, 5) == [], "figures of an earlier run must not stand for a run that stopped"
    assert harness.build_summary()["sections"][4]["status"] == "NOT RUN"


def test_a_verdict_prints_what_the_run_showed_on_the_gpu_and_a_second_one_joins_the_headline(harness, capsys):
    harness.ENVIRONMENT["gpu"] = "NVIDIA H200"
    harness.begin_section(3, "Runs")
    harness.verdict(3, "the short add scattered most")
    harness.verdict(3, "the host clock added the launch")
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "On this NVIDIA H200: the short add scattered most",
        "On this NVIDIA H200: the host clock added the launch",
    ], "a verdict prints 'On this <GPU>: <finding>'"
    assert harness.SECTIONS[3]["headline"] == "the short add scattered most; the host clock added the launch"
    assert harness.SECTIONS[3]["status"] == "ok"


def test_a_verdict_leaves_a_skipped_section_skipped_and_prints_nothing(harness, capsys):
    harness.begin_section(6, "Roofline", use_ncu=False)
    capsys.readouterr()
    harness.verdict(6, "memory-bound")
    assert harness.SECTIONS[6]["status"] == "SKIPPED" and capsys.readouterr().out == ""


def test_a_figure_recorded_twice_in_one_run_is_kept_once_with_its_last_value(harness):
    harness.ENVIRONMENT["gpu"] = "NVIDIA H200"
    harness.record_figure(6, "add", 4000.0, "GB/s", "dram_gbs")
    harness.record_figure(6, "add", 4100.0, "GB/s", "dram_gbs")
    assert [figure["value"] for figure in harness.FIGURES] == [4100.0]
