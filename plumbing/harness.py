"""The run's bookkeeping from what it left: each section's files (folders s<N> or s<N>_<what>), headline figures from
nsight's CSVs against datasheet peaks, and summary.json (report_summary, the last folded cell). No torch, nsight or
CUDA. Importing it does nothing; run as the notebook's cell it makes the output folder and works in it.
"""

import datetime
import json
import math
import os
import re
from pathlib import Path

from plumbing.folders import OUTPUT_FOLDER, choose_output_dir, prepare_output_dir  # noqa: F401  (one set of rules)
from plumbing.sections import NCU_ONLY_SECTIONS, SECTION_COUNT

OUT_DIR = choose_output_dir()


# Vendor peaks, dense. Each pattern matches only the variant listed: an H200 NVL gets no peaks rather than wrong ones.
GPU_PEAKS = [
    (r"\bT4\b", "T4", {"fp32_tflops": 8.1, "fp16_tflops": 65.0, "dram_gbs": 320.0}),
    (r"\bL4\b", "L4", {"fp32_tflops": 30.3, "fp16_tflops": 121.0, "dram_gbs": 300.0}),
    (r"A100-SXM4-40GB", "A100 40GB SXM", {"fp32_tflops": 19.5, "fp16_tflops": 312.0, "dram_gbs": 1555.0}),
    (r"A100-SXM4-80GB", "A100 80GB SXM", {"fp32_tflops": 19.5, "fp16_tflops": 312.0, "dram_gbs": 2039.0}),
    (r"H100 80GB HBM3$|H100 SXM", "H100 SXM", {"fp32_tflops": 67.0, "fp16_tflops": 989.0, "dram_gbs": 3350.0}),
    (r"^NVIDIA H200$", "H200 SXM", {"fp32_tflops": 67.0, "fp16_tflops": 989.0, "dram_gbs": 4800.0}),
]
PEAK_NAMES = {"fp32_tflops": "fp32", "fp16_tflops": "fp16 tensor", "dram_gbs": "DRAM"}


def lookup_peaks(gpu_name):
    """(label, peaks) for a GPU name from the table, or (None, None) for a GPU it does not know."""
    for pattern, label, peaks in GPU_PEAKS:
        if re.search(pattern, (gpu_name or "").strip()):
            return label, peaks
    return None, None


ENVIRONMENT = {}  # section 1's attempts (setup_helpers), then the machine's facts: written to summary.json
SUSPECT_FLOOR_PCT = 5.0  # see check_figure
SECTION_FOLDER = re.compile(r"s(\d+)(?:_\w+)?")  # a profiled call's output_prefix folder: s3, s5_sweep, ...


def check_figure(number, name, value, unit, peak_key, gpu):
    """A figure against the datasheet peak: SUSPECT above 100% or below SUSPECT_FLOOR_PCT, unchecked on unknown GPUs."""
    label, peaks = lookup_peaks(gpu)
    peak = peaks[peak_key] if peaks else None
    pct = 100.0 * value / peak if peak else None
    plausible = pct is not None and math.isfinite(pct) and SUSPECT_FLOOR_PCT <= pct <= 100.0
    check = "unchecked" if pct is None else "ok" if plausible else "SUSPECT"
    figure = dict(section=number, name=name, value=round(float(value), 3), unit=unit, peak=peak, peak_kind=peak_key)
    return figure | dict(peak_gpu=label, pct_of_peak=None if pct is None else round(pct, 1), check=check)


def last_csv(folder, kind):
    """The last call's <kind>-<function>-<call>.csv in folder (processed_data or profiled_data); None if none."""
    import pandas as pd  # here: scripts that import this module need no pandas

    written = sorted(Path(folder).glob(f"{kind}-*.csv"), key=lambda path: int(path.stem.rsplit("-", 1)[1]))
    return pd.read_csv(written[-1]) if written else None


def headline_figures(out_dir, gpu):
    """Sections 2, 5 and 6's figures that have a datasheet peak, from the CSVs their calls wrote into out_dir."""
    out_dir, figures = Path(out_dir), []
    if (summed := last_csv(out_dir / "s2_summed", "processed_data")) is not None:
        n, time_ns = summed.n[0], summed.AvgValue[0]
        tflops = 2 * n**3 / time_ns / 1e3  # 2 n^3 FLOPs over ns: GFLOP/s, then TFLOP/s
        figures.append(check_figure(2, f"fp32 product + ReLU, n={n}", tflops, "TFLOP/s", "fp32_tflops", gpu))
    if (runs := last_csv(out_dir / "s5_sweep", "profiled_data")) is not None:
        rates = runs[(runs.Metric == "matmul_tflops") & (runs.Annotation == "float16")]  # raw, not normalized
        name = f"float16 product, n={rates.n.max()}"
        figures.append(check_figure(5, name, rates.Value.mean(), "TFLOP/s", "fp16_tflops", gpu))
    if (bound := last_csv(out_dir / "s6_bound", "processed_data")) is not None:
        row = bound[(bound.Annotation == "x * 2.0") & (bound.Metric == "gpu__time_duration.sum")].iloc[0]
        rate = 8 * 2**26 / row.AvgValue  # 2^26 float32 read and written, bytes per ns: GB/s
        figures.append(check_figure(6, "x * 2.0, bytes it must move / time", rate, "GB/s", "dram_gbs", gpu))
    return figures


def section_files(out_dir):
    """{section number: [the files its profiled calls wrote, relative to out_dir]}."""
    found = {}
    for folder in sorted(Path(out_dir).iterdir()) if Path(out_dir).is_dir() else []:
        if folder.is_dir() and (match := SECTION_FOLDER.fullmatch(folder.name)):
            files = sorted(str(path.relative_to(out_dir)) for path in folder.rglob("*") if path.is_file())
            found.setdefault(int(match[1]), []).extend(files)
    return found


def describe_figure(figure):
    """'795.1 TFLOP/s = 80.4% of the H200 SXM fp16 tensor peak (989)', or peak n/a."""
    text = f"{figure['value']:,.1f} {figure['unit']}"
    if figure["peak"] is None:
        return f"{text} (peak n/a: this GPU is not in the datasheet table)"
    kind = PEAK_NAMES[figure["peak_kind"]]
    text += f" = {figure['pct_of_peak']:.1f}% of the {figure['peak_gpu']} {kind} peak ({figure['peak']:,g})"
    return text + ("  <- SUSPECT" if figure["check"] == "SUSPECT" else "")


def kernel_status(number, files, use_ncu):
    """What the kernel can tell of a section (executed_run.py reads the executed notebook for the final word)."""
    if number in NCU_ONLY_SECTIONS and not use_ncu:
        return "SKIPPED", "needs Nsight Compute; this run measured with CUPTI (section 1 says why)"
    return ("ok", "") if files or number == 1 else ("NOT RUN", "its profiled calls left no files")


def build_summary(environment, out_dir):
    """summary.json's content from the run's files: the environment, each section's files and status, the figures."""
    files, use_ncu = section_files(out_dir), environment.get("profiler") == "ncu"
    sections = []
    for number in range(1, SECTION_COUNT + 1):
        status, reason = kernel_status(number, files.get(number), use_ncu)
        entry = {"number": number, "status": status, "reason": reason, "headline": "", "seconds": None}
        sections.append(entry | {"files": files.get(number, [])})
    statuses = [section["status"] for section in sections]
    return {
        "notebook": "nsight_python_t4_tutorial.ipynb",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment,
        "sections": sections,
        "figures": headline_figures(out_dir, environment.get("gpu")),
        "counts": {status: statuses.count(status) for status in ("ok", "SKIPPED", "FAILED", "NOT RUN")},
    }


def summary_table(summary):
    """One row a section: its status, how many files it left, its figures against the datasheet."""
    import pandas as pd  # here: scripts that import this module need no pandas

    figures = {}
    for figure in summary["figures"]:
        figures.setdefault(figure["section"], []).append(f"{figure['name']}: {describe_figure(figure)}")
    rows = [(s["status"], len(s["files"]), "; ".join(figures.get(s["number"], []))) for s in summary["sections"]]
    index = pd.Index([s["number"] for s in summary["sections"]], name="section")
    return pd.DataFrame(rows, columns=["status", "files", "figures"], index=index)


def report_summary(facts):
    """The notebook's last cell: summary.json written into the output folder, one row a section shown."""
    from IPython.display import display  # outside a kernel it prints the table

    ENVIRONMENT.update(facts)
    summary = build_summary(ENVIRONMENT, OUT_DIR)
    (OUT_DIR / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(f"summary.json in {OUT_DIR}, for {ENVIRONMENT['gpu']} measured with {ENVIRONMENT['profiler']}")
    display(summary_table(summary))
    return summary


if __name__ == "__main__":  # the notebook's cell: make the output folder and work in it
    import pandas as pd  # here: scripts that import this module need no pandas

    prepare_output_dir(OUT_DIR)
    os.chdir(OUT_DIR)  # a profiled call's relative output_prefix, and its pictures, land in the output folder
    pd.set_option("display.width", 120, "display.max_columns", 12)  # tables fit a 120-character page
    print(f"Output folder: {OUT_DIR} (now the working folder)")
