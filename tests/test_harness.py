"""plumbing/harness.py: the output folder, datasheet peaks, figures from the run's CSVs, summary.json."""

import importlib
import json
import math
import shutil
from pathlib import Path

import evidence
import pytest

import plumbing.harness
from plumbing import executed_run
from plumbing.cells import NCU_ONLY_SECTIONS, SECTION_COUNT


@pytest.fixture
def harness(monkeypatch, tmp_path):
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    module = importlib.reload(plumbing.harness)
    module.prepare_output_dir(module.OUT_DIR)  # what the notebook's harness cell does
    return module


def test_importing_the_harness_creates_no_folder_and_prints_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NSPY_TUTORIAL_OUT", raising=False)
    importlib.reload(plumbing.harness)
    assert list(tmp_path.iterdir()) == [] and capsys.readouterr().out == "", "only the notebook's cell may act"


def test_the_output_folder_is_the_setting_else_under_content_on_colab_else_here(harness, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert harness.choose_output_dir({"NSPY_TUTORIAL_OUT": "/tmp/custom"}, on_colab=True) == Path("/tmp/custom")
    # the folder run_headless --help names, written out: not the module's constant compared with itself
    assert harness.choose_output_dir({}, on_colab=True) == Path("/content/nspy_tutorial_out")
    assert harness.choose_output_dir({}, on_colab=False) == tmp_path / "nspy_tutorial_out"


DATASHEETS = {  # the name torch reports: (label, fp32 TFLOP/s, fp16 tensor TFLOP/s, DRAM GB/s), dense figures
    "Tesla T4": ("T4", 8.1, 65.0, 320.0),
    "NVIDIA L4": ("L4", 30.3, 121.0, 300.0),
    "NVIDIA A100-SXM4-40GB": ("A100 40GB SXM", 19.5, 312.0, 1555.0),
    "NVIDIA A100-SXM4-80GB": ("A100 80GB SXM", 19.5, 312.0, 2039.0),
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 67.0, 989.0, 3350.0),
    "NVIDIA H200": ("H200 SXM", 67.0, 989.0, 4800.0),
    # another GPU, or one whose name holds a known one (L40 holds L4): no peaks
    **dict.fromkeys(["NVIDIA GeForce RTX 4090", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "", None], (None,)),
    **dict.fromkeys(["NVIDIA L40", "NVIDIA L40S", "NVIDIA T400", "NVIDIA H200 NVL", "NVIDIA A100 80GB PCIe"], (None,)),
}


@pytest.mark.parametrize("gpu", DATASHEETS)
def test_a_gpu_name_gets_its_own_datasheet_peaks_or_none(harness, gpu):
    label, peaks = harness.lookup_peaks(f"  {gpu}\n" if gpu else gpu)
    assert label == DATASHEETS[gpu][0], f"{gpu!r} got the datasheet of {label}: check GPU_PEAKS' patterns"
    got = (label, peaks["fp32_tflops"], peaks["fp16_tflops"], peaks["dram_gbs"]) if peaks else (None,)
    assert got == DATASHEETS[gpu] and (peaks is None or set(peaks) == set(harness.PEAK_NAMES)), f"{gpu}: {peaks}"


@pytest.mark.parametrize(
    ("pct", "check"), [(4.9, "SUSPECT"), (5.0, "ok"), (100.0, "ok"), (100.1, "SUSPECT"), (math.nan, "SUSPECT")]
)
def test_a_figure_outside_5_to_100_percent_of_its_peak_is_suspect(harness, pct, check):
    figure = harness.check_figure(6, "bound check", 3.2 * pct, "GB/s", "dram_gbs", "Tesla T4")  # 320 GB/s DRAM
    assert figure["check"] == check and figure["peak_gpu"] == "T4"
    assert "of the T4 DRAM peak (320)" in harness.describe_figure(figure), "the peak as the datasheet gives it"


def test_a_gpu_outside_the_datasheet_table_leaves_its_figures_unchecked_never_suspect(harness):
    figure = harness.check_figure(5, "x", 5e6, "TFLOP/s", "fp16_tflops", "NVIDIA GeForce RTX 4090")
    assert (figure["check"], figure["peak"]) == ("unchecked", None)
    assert harness.describe_figure(figure) == "5,000,000.0 TFLOP/s (peak n/a: this GPU is not in the datasheet table)"
    assert executed_run.run_problems({"sections": [], "figures": [figure]}) == [], "an unknown GPU fails no run"


def test_the_headline_figures_come_from_the_csvs_the_run_left(harness):
    folder = evidence.run_with("s2_summed")
    figures = {figure["section"]: figure for figure in harness.headline_figures(folder, evidence.gpu(folder))}
    (raw2,) = evidence.written(folder, "s2_summed", "profiled_data")
    assert figures[2]["value"] == pytest.approx(2 * 4096**3 / raw2.Value[0] / 1e3, rel=1e-4), "2 n^3 / ns / 1e3"
    assert figures[2]["peak_kind"] == "fp32_tflops" and figures[2]["check"] == "ok", figures[2]
    runs = evidence.written(folder, "s5_sweep", "profiled_data")[-1]
    float16 = runs[(runs.Metric == "matmul_tflops") & (runs.Annotation == "float16")].Value
    assert figures[5]["value"] == pytest.approx(float16.mean(), rel=1e-4), "the raw float16 TFLOP/s, not the ratio"
    assert figures[5]["name"] == "float16 product, n=8192" and figures[5]["peak_kind"] == "fp16_tflops"


def test_the_summary_gives_each_sections_files_and_skips_what_needs_nsight_compute_under_cupti(harness, capsys):
    folder = evidence.run_with("s2_summed")
    gpu = evidence.gpu(folder)
    for name in ("s2_summed", "s3", "s5_sweep"):
        shutil.copytree(folder / name, harness.OUT_DIR / name)
    summary = harness.report_summary({"gpu": gpu, "profiler": "cupti"})
    written = json.loads((harness.OUT_DIR / "summary.json").read_text())
    assert written == json.loads(json.dumps(summary, default=str)), "summary.json holds what the cell returned"
    statuses = {s["number"]: s["status"] for s in written["sections"]}
    expected = {
        n: "ok" if n in (1, 2, 3, 5) else "SKIPPED" if n in NCU_ONLY_SECTIONS else "NOT RUN"
        for n in range(1, SECTION_COUNT + 1)
    }
    assert statuses == expected, "files mean the calls ran; under CUPTI a section that needs ncu is SKIPPED"
    assert written["sections"][2]["files"] == sorted(f"s3/{p.name}" for p in (folder / "s3").iterdir())
    table = harness.summary_table(written)
    assert table.loc[2, "figures"].startswith("fp32 product + ReLU, n=4096: ") and table.loc[3, "files"] == 2
    assert f"for {gpu} measured with cupti" in capsys.readouterr().out
