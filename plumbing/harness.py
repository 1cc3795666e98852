"""Bookkeeping for the sections, the figures and summary.json; no torch, nsight or CUDA, no wrapping of a learner's
cell. A section is ok once its verdict cell calls `verdict`; FAILED comes from the executed notebook
(plumbing/executed_run.py). Importing it does nothing; run as the notebook's cell it creates the output folder.
"""

import datetime
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from plumbing.sections import NCU_ONLY_SECTIONS, SECTION_COUNT

ON_COLAB = "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


OUTPUT_FOLDER = "nspy_tutorial_out"  # the default output folder, for the notebook and scripts/run_headless alike


def choose_output_dir(environ=os.environ, on_colab=ON_COLAB):
    """NSPY_TUTORIAL_OUT, else OUTPUT_FOLDER under /content on Colab, else in the current folder."""
    if environ.get("NSPY_TUTORIAL_OUT"):
        return Path(environ["NSPY_TUTORIAL_OUT"]).expanduser().resolve()
    return Path("/content", OUTPUT_FOLDER) if on_colab else Path(OUTPUT_FOLDER).resolve()


def prepare_output_dir(folder, environ=os.environ):
    """Create the output folder and check that files can be written there; say which setting to fix if not."""
    setting = f"NSPY_TUTORIAL_OUT={environ['NSPY_TUTORIAL_OUT']}" if environ.get("NSPY_TUTORIAL_OUT") else str(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()  # a file can be written there (and is gone again)
    except OSError as error:
        why = "a file, not a folder" if folder.is_file() else f"cannot write there ({error.strerror or error})"
        raise RuntimeError(f"{setting}: {why}. Set NSPY_TUTORIAL_OUT to a folder you can write to.") from None
    return folder


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


def section_one_values(environment):
    """(L2_BYTES, PEAKS_LABEL, PEAKS) from section 1's environment (which notes whose datasheet the peaks are)."""
    label, peaks = lookup_peaks(environment.get("gpu"))
    environment["peaks_from"] = label or "n/a (GPU not in the datasheet table)"
    return environment["l2_bytes"], label, peaks


SECTIONS = {}  # number -> {"status", "reason", "environment_limit", "headline", "findings", "started", "seconds"}
FIGURES = []  # headline figures with a datasheet counterpart, checked against the GPU's peaks
ENVIRONMENT = {}  # filled by section 1, written to summary.json
SUSPECT_FLOOR_PCT = 5.0  # see record_figure
CLOCK = {"section": None, "at": time.perf_counter()}  # the last verdict: a section's time runs from the one before


def verdict(number, finding):
    """Print "On this <GPU>: finding", mark the section ok; verdicts in a row join its headline, a return restarts."""
    if CLOCK["section"] != number or number not in SECTIONS:
        SECTIONS[number] = {"status": "ok", "reason": "", "environment_limit": False, "findings": [],
                            "started": CLOCK["at"]}  # fmt: skip
    info = SECTIONS[number]
    info["findings"] = [*(f for f in info["findings"] if f != finding), finding]
    CLOCK.update(section=number, at=time.perf_counter())
    info.update(headline="; ".join(info["findings"]), seconds=round(CLOCK["at"] - info["started"], 2))
    print(f"On this {ENVIRONMENT.get('gpu') or 'GPU'}: {finding}")


def section_entry(number):
    """ok after its verdict; else SKIPPED if it needs Nsight Compute and section 1 chose CUPTI, else NOT RUN."""
    if number in SECTIONS:
        return {key: value for key, value in SECTIONS[number].items() if key not in ("started", "findings")}
    if number in NCU_ONLY_SECTIONS and ENVIRONMENT.get("profiler") == "cupti":
        reason = "needs Nsight Compute (see the CUPTI banner at the end of section 1)"
        return {"status": "SKIPPED", "reason": reason, "environment_limit": True, "headline": "", "seconds": 0.0}
    return {
        "status": "NOT RUN",
        "reason": "its verdict cell did not run",
        "environment_limit": False,
        "headline": "",
        "seconds": None,
    }


def record_figure(number, name, value, unit, peak_key):
    """Keep a headline figure with its % of the GPU's datasheet peak: SUSPECT above 100% (the wrong kernel or count)
    or below SUSPECT_FLOOR_PCT (a unit slip, a timed region far larger than the kernel); 'unchecked' on unknown GPUs.
    """
    label, peaks = lookup_peaks(ENVIRONMENT.get("gpu"))
    peak = peaks[peak_key] if peaks else None
    pct = 100.0 * value / peak if peak else None
    plausible = pct is not None and math.isfinite(pct) and SUSPECT_FLOOR_PCT <= pct <= 100.0
    check = "unchecked" if pct is None else "ok" if plausible else "SUSPECT"
    figure = {"section": number, "name": name, "value": round(float(value), 3), "unit": unit, "peak": peak,
              "peak_kind": peak_key, "peak_gpu": label, "pct_of_peak": None if pct is None else round(pct, 1),
              "check": check}  # fmt: skip
    FIGURES[:] = [f for f in FIGURES if (f["section"], f["name"]) != (number, name)] + [figure]
    return figure


def check_figure(number, name, value, unit, peak_key):
    """Record a headline figure for summary.json and print it against the datasheet peak."""
    print(f"{name}: {describe_figure(record_figure(number, name, value, unit, peak_key))}")


def describe_figure(figure):
    """'795.1 TFLOP/s = 80.4% of the H200 SXM fp16 tensor peak (989)', or peak n/a."""
    text = f"{figure['value']:,.1f} {figure['unit']}"
    if figure["peak"] is None:
        return f"{text} (peak n/a: this GPU is not in the datasheet table)"
    kind = PEAK_NAMES[figure["peak_kind"]]
    text += f" = {figure['pct_of_peak']:.1f}% of the {figure['peak_gpu']} {kind} peak ({figure['peak']:,.0f})"
    return text + ("  <- SUSPECT" if figure["check"] == "SUSPECT" else "")


def build_summary():
    """summary.json's content: the environment, every section's status and headline, and the figures."""
    sections = [{"number": number, **section_entry(number)} for number in range(1, SECTION_COUNT + 1)]
    statuses = [s["status"] for s in sections]
    return {
        "notebook": "nsight_python_t4_tutorial.ipynb",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "environment": ENVIRONMENT,
        "sections": sections,
        "figures": list(FIGURES),
        "counts": {status: statuses.count(status) for status in ("ok", "SKIPPED", "FAILED", "NOT RUN")},
        "total_seconds": round(sum(s["seconds"] or 0 for s in sections), 1),
    }


def summary_table(summary):
    """One row a section: its status, seconds and headline figures against the datasheet (its verdict is above)."""
    import pandas as pd  # here: scripts that import this module (make_wheelhouse.py) need no pandas

    figures = {}
    for figure in summary["figures"]:
        figures.setdefault(figure["section"], []).append(f"{figure['name']}: {describe_figure(figure)}")
    rows = [(s["status"], s["seconds"], "; ".join(figures.get(s["number"], [])),
             "" if s["status"] == "ok" else s["reason"]) for s in summary["sections"]]  # fmt: skip
    columns = ["status", "seconds", "figures", "why not ok"]
    return pd.DataFrame(rows, columns=columns, index=[s["number"] for s in summary["sections"]]).rename_axis("section")


def report_summary():
    """The notebook's last cell: write summary.json and show one row a section (the verdicts stay where they ran)."""
    summary = build_summary()
    path = OUT_DIR / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(f"{summary['counts']['ok']} sections ok in {summary['total_seconds']:.0f} s on {ENVIRONMENT.get('gpu')}")
    from IPython.display import display  # outside a kernel it prints the table

    display(summary_table(summary))
    return summary


class CellFailed(Exception):
    """Raised by %%needs_ncu after the cell it ran failed, so that Run all and nbmake stop at that cell."""

    def _render_traceback_(self):  # IPython prints this instead of a second traceback: the first is above
        return [str(self)]


SKIPS = []  # the reasons %%needs_ncu skipped cells for, one a cell


def needs_ncu(line, cell):
    """The cell magic %%needs_ncu: run the cell as typed when Nsight Compute measures; under CUPTI print that it
    was skipped, and why. A learner copying the cell deletes the magic's line."""
    from IPython import get_ipython

    shell = get_ipython()
    if not shell.user_ns.get("USE_NCU"):
        why = shell.user_ns.get("CUPTI_REASON") or "section 1 chose CUPTI"  # said in full once, then referred to
        print(f"SKIPPED: needs Nsight Compute ({'CUPTI mode; why: above' if SKIPS else why}).")
        SKIPS.append(why)
        return None
    # In its own history entry, as if typed alone: IPython reads a trailing ";" and sets _ from that entry.
    if not shell.run_cell(cell, store_history=True).success:
        raise CellFailed("The cell above failed under %%needs_ncu; its traceback is printed above.")
    return None


if __name__ == "__main__":  # the notebook's cell: make the output folder, work in it, register %%needs_ncu
    import pandas as pd  # here: scripts that import this module (make_wheelhouse.py) need no pandas
    from IPython import get_ipython

    prepare_output_dir(OUT_DIR)
    STARTED_IN = Path.cwd()  # the notebook's own folder, for paths given relative to it (the recorded pages)
    os.chdir(OUT_DIR)  # a profiled call's relative output_prefix, and nsight's plots, land in the output folder
    pd.set_option("display.width", 120, "display.max_columns", 12)  # tables fit a 120-character page
    if get_ipython() is not None:  # a recorder runs this cell outside IPython, and drops the magic's line itself
        get_ipython().register_magic_function(needs_ncu, "cell")
    print(f"Output folder: {OUT_DIR} (now the working folder)")
