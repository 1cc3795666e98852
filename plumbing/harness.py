"""Bookkeeping for headless runs. Nothing here imports torch or nsight, or touches CUDA.

Each section opens with a folded cell that calls `begin_section`. From then on, every code cell of
that section runs inside a guard added by an IPython AST transformer: an exception marks the section
FAILED (with the first line of the error) instead of stopping Run all, and the later cells of a
FAILED or SKIPPED section print one line and run nothing. The learner's code is left as written.

Importing this module (tests, scripts) has no side effects; run as the notebook's cell (or as __main__) it
creates the output folder and arms the guard.
"""

import ast
import datetime
import functools
import json
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path

import pandas as pd
from IPython import get_ipython
from IPython.display import display

from plumbing.cells import CUPTI_SECTIONS, NCU_ONLY_SECTIONS, SECTION_COUNT

ON_COLAB = "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ
STRICT = os.environ.get("NSPY_TUTORIAL_STRICT") == "1"  # headless runs: fail on FAILED or SUSPECT


def choose_output_dir(environ=os.environ, on_colab=ON_COLAB):
    """Where every file this notebook writes goes: NSPY_TUTORIAL_OUT, else a fixed default."""
    if environ.get("NSPY_TUTORIAL_OUT"):
        return Path(environ["NSPY_TUTORIAL_OUT"]).expanduser().resolve()
    return Path("/content/nspy_tutorial") if on_colab else Path("nspy_tutorial_out").resolve()


OUT_DIR = choose_output_dir()


def out_prefix(name):
    """An nsight output_prefix inside OUT_DIR. The trailing slash makes nsight create a folder."""
    return f"{OUT_DIR / name}/"


# ---------------------------------------------------------------- units
SI_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6, "n": 1e-9}
UNIT_PART = re.compile(r"^([kKMGTmun]?)(byte|cycle|second|s|hz)$", re.IGNORECASE)


def to_base_units(value, unit):
    """A value in ncu's unit ('Mbyte', 'cycle/nsecond', 'usecond', 'GHz') as bytes, cycles, seconds or Hz.

    Nsight Compute may scale a metric's unit; converting by the Unit column keeps the arithmetic right.
    """
    factor = 1.0
    for position, part in enumerate(str(unit).split("/")):
        match = UNIT_PART.match(part.strip())
        if match is None:
            raise ValueError(f"unexpected unit {unit!r}: expected a (k|M|G|m|u|n) byte, cycle, second or Hz")
        scale = SI_PREFIX[match.group(1)] if not (match.group(1) == "m" and match.group(2).lower() == "hz") else 1e6
        factor = factor * scale if position == 0 else factor / scale
    return value * factor


def pivot_in_base_units(frame, index):
    """An index x Metric table of AvgValue converted to base units (s, bytes, Hz) by the Unit column.

    Percentages ('%') pass through unchanged.
    """
    base = [v if u == "%" else to_base_units(v, u) for v, u in zip(frame.AvgValue, frame.Unit, strict=True)]
    return frame.assign(base=base).pivot(index=index, columns="Metric", values="base")


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


def section_one_values(environment, use_ncu):
    """(L2_BYTES, PEAKS_LABEL, PEAKS, NCU_ONLY_SKIP) for the later sections, from the environment section 1 recorded.

    The notebook, scripts/record_ncu.py and the recorded page all make these names here. It also notes in the
    environment which datasheet the peaks come from.
    """
    label, peaks = lookup_peaks(environment.get("gpu"))
    environment["peaks_from"] = label or "n/a (GPU not in the datasheet table)"
    return environment["l2_bytes"], label, peaks, "" if use_ncu else NCU_ONLY_REASON


# ---------------------------------------------------------------- sections
SECTIONS = {}  # number -> {"title", "status", "reason", "environment_limit", "headline", "started", "seconds"}
FIGURES = []  # headline figures with a datasheet counterpart, checked against the GPU's peaks
ENVIRONMENT = {}  # filled by section 1, written to summary.json
SUSPECT_FLOOR_PCT = 5.0  # see record_figure
GUARD = {"section": None, "harness_cell": False}  # the open section; is the running cell a folded one?


def _close_open_sections():
    for info in SECTIONS.values():
        if info["seconds"] is None:
            info["seconds"] = round(time.perf_counter() - info["started"], 2)


def begin_section(number, title, skip_reason=None, guarded=True):
    """Open section `number`; the previous one ends here. A skip_reason marks it SKIPPED at once.

    guarded=False (section 1) lets errors stop Run all: nothing after a broken setup can work.
    """
    _close_open_sections()
    SECTIONS[number] = {
        "title": title,
        "status": "ok",
        "reason": "",
        "environment_limit": False,
        "headline": "",
        "started": time.perf_counter(),
        "seconds": None,
    }
    GUARD["section"] = number if guarded else None
    if skip_reason:
        SECTIONS[number].update(status="SKIPPED", reason=skip_reason, environment_limit=True)
        print("SKIPPED, see the banner at the end of section 1: this section needs Nsight Compute.")


def end_sections():
    """After the last section: cells are no longer guarded."""
    _close_open_sections()
    GUARD["section"] = None


def fail_section(error):
    """Mark the open section FAILED with the first line of the error; show a short traceback."""
    info = SECTIONS[GUARD["section"]]
    first_line = (str(error).strip().splitlines() or [""])[0]
    info.update(status="FAILED", reason=f"{type(error).__name__}: {first_line}"[:300])
    print(f"Section {GUARD['section']} FAILED: {info['reason']}")
    traceback.print_exception(type(error), error, error.__traceback__, limit=-3, file=sys.stdout)
    print("The notebook goes on with the next section; the summary lists this failure.")


def skipped_cell():
    info = SECTIONS[GUARD["section"]]
    if info["status"] == "FAILED":
        print(f"(not run: section {GUARD['section']} FAILED above)")


def show_last(value):
    """What Jupyter does with a cell's last expression, for cells that run inside the guard."""
    if value is not None:
        display(value)


class SectionGuard(ast.NodeTransformer):
    """Wrap a section cell in try/except (or skip it) without changing what the learner wrote."""

    def visit_Module(self, module):
        number = GUARD["section"]
        if number is None or GUARD["harness_cell"] or not module.body:
            return module
        if SECTIONS[number]["status"] != "ok":
            module.body = ast.parse("skipped_cell()").body
            return module
        body = list(module.body)
        if isinstance(body[-1], ast.Expr):
            body[-1] = ast.Expr(ast.Call(ast.Name("show_last", ast.Load()), [body[-1].value], []))
        handler = ast.ExceptHandler(
            ast.Name("Exception", ast.Load()), "section_error", ast.parse("fail_section(section_error)").body
        )
        module.body = [ast.Try(body=body, handlers=[handler], orelse=[], finalbody=[])]
        return ast.fix_missing_locations(module)


def _note_cell_kind(info):
    # Folded '# @title' cells are the harness's own: they are never guarded.
    GUARD["harness_cell"] = (info.raw_cell or "").lstrip().startswith("# @title")


def install_section_guard(shell=None):
    shell = shell or get_ipython()
    if shell is None:  # plain Python (a script running these cells): nothing to guard
        return
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if type(t).__name__ != "SectionGuard"]
    shell.ast_transformers.append(SectionGuard())
    for callback in list(shell.events.callbacks["pre_run_cell"]):
        if getattr(callback, "__name__", "") == "_note_cell_kind":
            shell.events.unregister("pre_run_cell", callback)
    shell.events.register("pre_run_cell", _note_cell_kind)


def _record_if_ok(number, record):
    if SECTIONS.get(number, {}).get("status") != "ok":
        return None
    saved, GUARD["section"] = GUARD["section"], number
    try:
        return record()
    except Exception as error:  # the summary reports it; Run all goes on
        fail_section(error)
        return None
    finally:
        GUARD["section"] = saved


def section_figures(number):
    """Decorator for a folded cell that records a section's figures: it runs at once, if the section is ok.

    A raise there marks the section FAILED, like a raise in the section's own cells.
    """
    return functools.partial(_record_if_ok, number)


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


def set_headline(number, text):
    SECTIONS[number]["headline"] = text
    print(f"-> {text}")


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


def describe_figure(figure):
    """'795.1 TFLOP/s = 80.4% of the H200 SXM fp16 tensor peak (989)', or peak n/a."""
    text = f"{figure['value']:,.1f} {figure['unit']}"
    if figure["peak"] is None:
        return f"{text} (peak n/a: this GPU is not in the datasheet table)"
    kind = PEAK_NAMES[figure["peak_kind"]]
    text += f" = {figure['pct_of_peak']:.1f}% of the {figure['peak_gpu']} {kind} peak ({figure['peak']:,.0f})"
    return text + ("  <- SUSPECT" if figure["check"] == "SUSPECT" else "")


# ---------------------------------------------------------------- summary
def build_summary(strict=False):
    _close_open_sections()
    sections = []
    for number in range(1, SECTION_COUNT + 1):
        info = SECTIONS.get(number)
        if info is None:
            info = {
                "title": "",
                "status": "NOT RUN",
                "reason": "its cells did not run",
                "environment_limit": False,
                "headline": "",
                "seconds": None,
            }
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


def enforce_strict_mode(summary, strict):
    problems = summary_problems(summary)
    if strict and problems:
        raise RuntimeError("NSPY_TUTORIAL_STRICT=1 and the run is not clean:\n- " + "\n- ".join(problems))
    return problems


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


if __name__ == "__main__":  # the notebook's cell: make the output folder, guard the sections
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 120)  # tables fit a 120-character page
    pd.set_option("display.max_columns", 12)
    install_section_guard()
    print(f"Output folder: {OUT_DIR}")
