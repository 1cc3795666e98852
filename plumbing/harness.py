"""Bookkeeping for the sections, the figures and summary.json. Nothing here imports torch or nsight, or touches CUDA.

Nothing here wraps or changes a learner's cell: sections record their status through ordinary calls in their own
folded cells. A section's first cell calls `begin_section` (NOT RUN, or SKIPPED when it needs Nsight Compute and
this run uses CUPTI); `check_figure` holds a headline figure against the datasheet, and the section's verdict cell
calls `verdict`, which prints what the run showed and marks the section ok. A cell that
raises is an ordinary error and stops Run all. The headless run reads which cells raised from the executed
notebook and marks their sections FAILED (plumbing/executed_run.py).

Importing this module (tests, scripts) has no side effects; run as the notebook's cell (or as __main__) it
creates the output folder.
"""

import datetime
import json
import math
import os
import re
import sys
import time
from pathlib import Path

import pandas as pd

from plumbing.sections import CUPTI_SECTIONS, NCU_ONLY_SECTIONS, SECTION_COUNT

ON_COLAB = "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def read_strict(environ=os.environ):
    """NSPY_TUTORIAL_STRICT: 1 makes the summary raise on a FAILED section or a SUSPECT figure (headless runs)."""
    value = environ.get("NSPY_TUTORIAL_STRICT", "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(
            f"NSPY_TUTORIAL_STRICT={value!r} is neither 1 nor 0. Set NSPY_TUTORIAL_STRICT=1 to make the last cell "
            "fail on a FAILED section or a SUSPECT figure, or 0 (or unset it) for a normal run."
        )
    return value == "1"


STRICT = read_strict()


# The default output folder's name, for the notebook and scripts/run_headless alike: under /content on Colab, else
# in the current folder (the clone, for run_headless).
OUTPUT_FOLDER = "nspy_tutorial_out"


def choose_output_dir(environ=os.environ, on_colab=ON_COLAB):
    """Where every file this notebook writes goes: NSPY_TUTORIAL_OUT, else the default folder OUTPUT_FOLDER."""
    if environ.get("NSPY_TUTORIAL_OUT"):
        return Path(environ["NSPY_TUTORIAL_OUT"]).expanduser().resolve()
    return Path("/content", OUTPUT_FOLDER) if on_colab else Path(OUTPUT_FOLDER).resolve()


def prepare_output_dir(folder, environ=os.environ):
    """Create the output folder and check that files can be written there; say which setting to fix if not."""
    given = environ.get("NSPY_TUTORIAL_OUT")
    setting = f"NSPY_TUTORIAL_OUT={given}" if given else f"The default output folder {folder}"
    fix = "Set NSPY_TUTORIAL_OUT to a folder you can write to (it is created if missing)" + (
        ", or unset it to use the default." if given else "."
    )
    if folder.exists() and not folder.is_dir():
        raise RuntimeError(f"{setting}: that is a file, not a folder. {fix}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".nspy_write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise RuntimeError(f"{setting}: cannot write there ({error.strerror or error}). {fix}") from None
    return folder


OUT_DIR = choose_output_dir()


# ---------------------------------------------------------------- datasheet peaks
# Vendor peaks, dense, no sparsity. L2 size and SM count are read from the device instead.
# Each pattern matches the name nvidia-smi and torch report, and only the SXM/datasheet variant
# listed: an H100 PCIe or an H200 NVL has other peaks, so it gets none rather than wrong ones.
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


NCU_ONLY_REASON = "needs Nsight Compute (see the CUPTI banner at the end of section 1)"


def section_one_values(environment):
    """(L2_BYTES, PEAKS_LABEL, PEAKS) for the later sections, from the environment section 1 recorded.

    The notebook, scripts/record_ncu.py and the recorded page all make these names here. It also notes in the
    environment which datasheet the peaks come from.
    """
    label, peaks = lookup_peaks(environment.get("gpu"))
    environment["peaks_from"] = label or "n/a (GPU not in the datasheet table)"
    return environment["l2_bytes"], label, peaks


# ---------------------------------------------------------------- sections
SECTIONS = {}  # number -> {"title", "status", "reason", "environment_limit", "headline", "started", "seconds"}
FIGURES = []  # headline figures with a datasheet counterpart, checked against the GPU's peaks
ENVIRONMENT = {}  # filled by section 1, written to summary.json
SUSPECT_FLOOR_PCT = 5.0  # see record_figure
NOT_RUN_REASON = "its verdict cell did not run"


def _new_section(title):
    return {
        "title": title,
        "status": "NOT RUN",
        "reason": NOT_RUN_REASON,
        "environment_limit": False,
        "headline": "",
        "started": time.perf_counter(),
        "seconds": None,
    }


def begin_section(number, title, use_ncu=None):
    """A section's first (folded) cell: the section is NOT RUN until its verdict cell runs (verdict).

    use_ncu: section 1's choice of backend (USE_NCU). A section that needs Nsight Compute (plumbing/sections.py) is
    SKIPPED when it is False; those sections must be given it. Running the cell again starts the section afresh:
    its figures are dropped until its cells check them again.
    """
    if number in NCU_ONLY_SECTIONS and use_ncu is None:
        raise ValueError(f"section {number} needs Nsight Compute: open it with begin_section(..., use_ncu=USE_NCU)")
    SECTIONS[number] = _new_section(title)
    FIGURES[:] = [figure for figure in FIGURES if figure["section"] != number]
    if number in NCU_ONLY_SECTIONS and not use_ncu:
        SECTIONS[number].update(status="SKIPPED", reason=NCU_ONLY_REASON, environment_limit=True, seconds=0.0)
        print(f"SKIPPED: section {number} needs Nsight Compute, and this run uses CUPTI (see the end of section 1).")


def verdict(number, finding):
    """Print what section `number`'s run showed ("On this <GPU>: ..."), keep it as the section's headline and mark
    the section ok. A section with two verdicts keeps both. Nothing happens for a SKIPPED section."""
    info = SECTIONS.setdefault(number, _new_section(""))
    if info["status"] == "SKIPPED":
        return
    info["headline"] = f"{info['headline']}; {finding}" if info["status"] == "ok" else finding
    info.update(status="ok", reason="", seconds=round(time.perf_counter() - info["started"], 2))
    print(f"On this {ENVIRONMENT.get('gpu') or 'GPU'}: {finding}")


def _mangled_names(symbol):
    """The length-prefixed identifiers of an Itanium-mangled C++ symbol ('_ZN7cutlass...'), in order."""
    names, position = [], 2
    while position < len(symbol):
        match = re.match(r"(\d+)([A-Za-z_]\w*)", symbol[position:])
        if match and len(match.group(2)) >= int(match.group(1)):
            length = int(match.group(1))
            names.append(match.group(2)[:length])
            position += len(match.group(1)) + length
        else:
            position += 1
    return names


def short_kernel_name(name, width=48):
    """A kernel name a reader can use: no return type, template arguments, parameters or mangling."""
    text = str(name)
    if text.startswith("_Z") and _mangled_names(text):
        text = max(_mangled_names(text), key=len)  # the kernel's own name is the longest identifier in it
    text = re.sub(r"^void\s+", "", text)
    depth, kept = 0, []
    for char in text:  # drop everything inside <...> and (...)
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            kept.append(char)
    text = "".join(kept).strip() or str(name)
    return text if len(text) <= width else text[: width - 3] + "..."


def record_figure(number, name, value, unit, peak_key):
    """Keep a headline figure with its % of the detected GPU's datasheet peak, and judge it.

    Above 100% of peak is physically impossible for the timed kernel: the wrong kernel, or too
    few bytes or FLOPs, was counted. Below SUSPECT_FLOOR_PCT on a workload sized to fill the GPU
    points the other way: a unit slip (ns against us is a factor of 1000) or a timed region that
    holds far more than the kernel. Either way the figure is SUSPECT. An unknown GPU has no peak:
    its figures are 'unchecked', never compared against another GPU's datasheet.
    """
    label, peaks = lookup_peaks(ENVIRONMENT.get("gpu"))
    peak = peaks[peak_key] if peaks else None
    pct = 100.0 * value / peak if peak else None
    if pct is None:
        check = "unchecked"
    elif not math.isfinite(pct) or pct > 100.0:
        check = "SUSPECT"
    elif pct < SUSPECT_FLOOR_PCT:
        check = "SUSPECT"
    else:
        check = "ok"
    figure = {
        "section": number,
        "name": name,
        "value": round(float(value), 3),
        "unit": unit,
        "peak": peak,
        "peak_kind": peak_key,
        "peak_gpu": label,
        "pct_of_peak": None if pct is None else round(pct, 1),
        "check": check,
    }
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


# ---------------------------------------------------------------- units
# ncu may scale a metric's unit (ns or usecond, byte or Mbyte); each row says which in its Unit column. Convert to
# seconds, bytes and Hz before any arithmetic; a unit missing here is an error, never a silent factor.
TO_BASE_UNITS = {
    **{"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0, "second": 1.0},
    **{"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "sector": 32.0},  # an L2 sector holds 32 bytes
    **{"hz": 1.0, "Hz": 1.0, "MHz": 1e6, "GHz": 1e9, "cycle/second": 1.0, "cycle/usecond": 1e6, "cycle/nsecond": 1e9},
    "%": 1.0,  # percentages stay percentages
}


def in_base_units(frame, index):
    """An index x Metric table of AvgValue in seconds, bytes and Hz (percentages stay percentages)."""
    unknown = set(frame.Unit) - set(TO_BASE_UNITS)
    if unknown:
        raise ValueError(f"no conversion for the units {sorted(unknown)}: add their factors to TO_BASE_UNITS")
    in_base = frame.AvgValue * frame.Unit.map(TO_BASE_UNITS)
    return frame.assign(base=in_base).pivot(index=index, columns="Metric", values="base")


# ---------------------------------------------------------------- summary
def build_summary(strict=False):
    sections = []
    for number in range(1, SECTION_COUNT + 1):
        info = SECTIONS.get(number) or {**_new_section(""), "reason": "its cells did not run"}
        sections.append({"number": number, **{k: v for k, v in info.items() if k != "started"}})
    statuses = [s["status"] for s in sections]
    return {
        "notebook": "nsight_python_t4_tutorial.ipynb",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "strict": strict,
        "environment": ENVIRONMENT,
        "sections": sections,
        "figures": list(FIGURES),
        "counts": {status: statuses.count(status) for status in ("ok", "SKIPPED", "FAILED", "NOT RUN")},
        "suspect_figures": sum(f["check"] == "SUSPECT" for f in FIGURES),
        "total_seconds": round(sum(s["seconds"] or 0 for s in sections), 1),
    }


def write_summary(strict=False):
    summary = build_summary(strict)
    path = OUT_DIR / "summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary, path


def summary_problems(summary):
    """What makes a run fail in strict mode: FAILED or NOT RUN sections and SUSPECT figures."""
    problems = [
        f"section {s['number']} {s['status']}: {s['reason']}"
        for s in summary["sections"]
        if s["status"] in ("FAILED", "NOT RUN")
    ]
    problems += [
        f"SUSPECT figure in section {f['section']}: {f['name']} = {f['value']} {f['unit']} "
        f"({f['pct_of_peak']}% of peak {f['peak']})"
        for f in summary["figures"]
        if f["check"] == "SUSPECT"
    ]
    return problems


STRICT_REFUSAL = "NSPY_TUTORIAL_STRICT=1 and the run is not clean"  # how the summary cell's own raise begins


def enforce_strict_mode(summary, strict):
    problems = summary_problems(summary)
    if strict and problems:
        raise RuntimeError(f"{STRICT_REFUSAL}:\n- " + "\n- ".join(problems))
    return problems


def report_summary(strict):
    """The notebook's last cell: close the sections, write summary.json, show the sections and the figures against
    the datasheet. Strict mode (NSPY_TUTORIAL_STRICT=1) raises here on a FAILED or NOT RUN section or a SUSPECT figure.
    """
    summary, path = write_summary(strict=strict)
    table = pd.DataFrame(summary["sections"])[["number", "title", "status", "seconds"]]
    print(table.round(1).to_string(index=False))
    print("\nheadline of each section (SKIPPED and NOT RUN ones give their reason):")
    for section in summary["sections"]:  # whole, one a line: a table column would cut them off
        print(f"{section['number']:>3}. {section.get('headline') or section.get('reason') or '-'}")
    print(f"\nwall time of the sections: {summary['total_seconds']:.0f} s on {ENVIRONMENT.get('gpu')}")
    print("\nheadline figures against the datasheet:")
    for figure in summary["figures"]:
        print(f"  [{figure['check']:>9s}] section {figure['section']}: {figure['name']}: {describe_figure(figure)}")
    problems = enforce_strict_mode(summary, strict)
    print(
        "\nclean run: no FAILED section, no SUSPECT figure"
        if not problems
        else "\nnot clean:\n- " + "\n- ".join(problems)
    )
    print(f"written: {path}")
    return summary


def _listed(numbers):
    """'2, 3, 5, 8 and 9'."""
    words = [str(n) for n in sorted(numbers)]
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)


def cupti_banner(reason):
    """What section 1 shows when this run measures with CUPTI: why, and which sections run or are SKIPPED."""
    return "\n".join(
        [
            "=" * 100,
            "CUPTI MODE: nsight-python measures with its CUPTI backend, because",
            f"  {reason}",
            f"  Sections {_listed(CUPTI_SECTIONS)} run on CUPTI and record kernel durations only.",
            f"  Sections {_listed(NCU_ONLY_SECTIONS)} need hardware counters or an .ncu-rep and are SKIPPED.",
            "=" * 100,
        ]
    )


if __name__ == "__main__":  # the notebook's cell: make the output folder
    prepare_output_dir(OUT_DIR)
    pd.set_option("display.width", 120)  # tables fit a 120-character page
    pd.set_option("display.max_columns", 12)
    print(f"Output folder: {OUT_DIR}")
