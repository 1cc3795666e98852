"""Bookkeeping for headless runs. Nothing here imports torch or nsight, or touches CUDA.

Each section opens with a folded cell that calls `begin_section`. From then on, every code cell runs inside a
guard added by an IPython AST transformer (the learner's code is left as written): an exception is shown with
its full traceback, marks the section of the cell that raised FAILED, and does not stop Run all; the summary
lists the section. Every cell still runs, a corrected one after a failure included. The one exception: a cell
whose first line says it needs Nsight Compute runs nothing when this run uses CUPTI.

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

try:
    from IPython import get_ipython
    from IPython.display import display
except ImportError:  # a plain Python running these cells (scripts/record_ncu.py's environment): nothing to guard

    def get_ipython():
        return None

    display = print

from plumbing.cells import (
    CUPTI_SECTIONS,
    NCU_ONLY_CELL_MARK,
    NCU_ONLY_SECTIONS,
    SECTION_COUNT,
    SECTION_ONE_NAMES,
    section_of,
)

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


def choose_output_dir(environ=os.environ, on_colab=ON_COLAB):
    """Where every file this notebook writes goes: NSPY_TUTORIAL_OUT, else a fixed default."""
    if environ.get("NSPY_TUTORIAL_OUT"):
        return Path(environ["NSPY_TUTORIAL_OUT"]).expanduser().resolve()
    return Path("/content/nspy_tutorial") if on_colab else Path("nspy_tutorial_out").resolve()


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


def out_prefix(name):
    """An nsight output_prefix inside OUT_DIR. The trailing slash makes nsight create a folder."""
    return f"{OUT_DIR / name}/"


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
# The guard's state. open: the section opened last. cell: the section of the running cell (None: not guarded).
# seen: each cell source -> the section it first ran in, so that a cell run again later is charged to its own
# section, not to the one opened last. unguarded: sections whose errors stop Run all (section 1: nothing
# works after a broken set-up). skip: the running cell needs Nsight Compute and this run uses CUPTI.
GUARD = {"open": None, "cell": None, "seen": {}, "unguarded": set(), "skip": False}


def _close_open_sections():
    for info in SECTIONS.values():
        if info["seconds"] is None:
            info["seconds"] = round(time.perf_counter() - info["started"], 2)


def _new_section(title):
    return {
        "title": title,
        "status": "ok",
        "reason": "",
        "environment_limit": False,
        "headline": "",
        "started": time.perf_counter(),
        "seconds": None,
    }


def begin_section(number, title, skip_reason=None, guarded=True):
    """Open section `number`; the previous one ends here. A skip_reason marks it SKIPPED at once.

    Running a section's first cell again starts the section afresh (status ok). guarded=False (section 1)
    lets errors stop Run all: nothing after a broken set-up can work.
    """
    _close_open_sections()
    SECTIONS[number] = _new_section(title)
    GUARD["open"] = number
    (GUARD["unguarded"].discard if guarded else GUARD["unguarded"].add)(number)
    if skip_reason:
        SECTIONS[number].update(status="SKIPPED", reason=skip_reason, environment_limit=True)
        print("SKIPPED, see the banner at the end of section 1: this section needs Nsight Compute.")


def end_sections():
    """After the last section: cells that never ran in a section are no longer guarded."""
    _close_open_sections()
    GUARD["open"] = None


def name_error_hint(error, number):
    """What to run first when a name is missing, or None: section 1's names, sections not run yet, a FAILED one."""
    name = getattr(error, "name", None) or next(iter(re.findall(r"name '(\w+)'", str(error))), "")
    if name in SECTION_ONE_NAMES:
        return f"'{name}' is made by section 1 (Set up): run section 1 first, from the top (or Runtime > Run all)."
    if 1 not in SECTIONS:
        return "Section 1 (Set up) has not run in this session: run the notebook from the top (or Runtime > Run all)."
    if number in GUARD["unguarded"]:
        return f"Run the cells of section {number} in order, from its first cell (or Runtime > Run all)."
    earlier = range(2, number) if number else ()
    not_run = [n for n in earlier if n not in SECTIONS]
    if not_run:
        return (
            f"Section{'s' if len(not_run) > 1 else ''} {_listed(not_run)} of this notebook did not run in this "
            f"session, and '{name}' may come from there: run {'them' if len(not_run) > 1 else 'it'} first, in order "
            "(or Runtime > Run all)."
        )
    failed = [n for n in SECTIONS if SECTIONS[n]["status"] == "FAILED" and (number is None or n <= number)]
    if failed:
        return (
            f"Section {_listed(failed)} FAILED above, so '{name}' may never have been made: fix the first cell that "
            "failed, run it again, then this one."
        )
    return None


def fail_section(error, number=None):
    """Charge an error to section `number` (default: the running cell's): FAILED, with the first error's first line."""
    number = GUARD["cell"] if number is None else number
    info = SECTIONS.setdefault(number, _new_section(""))
    if info["status"] != "FAILED":  # the first error is the cause; later ones often follow from it
        first_line = (str(error).strip().splitlines() or [""])[0]
        info.update(status="FAILED", reason=f"{type(error).__name__}: {first_line}"[:300])
    return info


def show_error(error):
    """The error with its full traceback, published as an error output: the front end shows the cell as failed.

    Python's own formatting, because the cell's frame is still running here and IPython's would point at the
    guard's last line. Headless (NSPY_TUTORIAL_STRICT=1) it goes to stderr instead: nbmake stops at a cell with
    an error output, and Run all must reach the summary, which then fails the run.
    """
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    shell = get_ipython()
    publish = getattr(shell, "_showtraceback", None)
    sys.stdout.flush()
    if publish is None or STRICT:
        print(text, file=sys.stderr)
        sys.stderr.flush()
    else:
        publish(type(error), str(error), text.splitlines())


def cell_failed(error, number):
    """A guarded cell raised: charge its section, show the error, say what happens next.

    Returns False after the last section (the summary cell): then the error goes on and stops Run all.
    """
    info = fail_section(error, number)
    if GUARD["open"] is None:
        return False
    show_error(error)
    lines = [
        f"This cell FAILED. Section {number} is marked FAILED ({info['reason']}). Fix the cell and run it again.",
        "Run all goes on with the next cells; the summary at the end lists every FAILED section.",
    ]
    hint = name_error_hint(error, number) if isinstance(error, NameError) else None
    print("\n".join(([hint] if hint else []) + lines))
    return True


def _name_error_outside_sections(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for a NameError that stops Run all (section 1, or before any section): the error, a hint."""
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    hint = name_error_hint(value, GUARD["cell"])
    if hint:
        print(hint)


def show_last(value):
    """What Jupyter does with a cell's last expression, for cells that run inside the guard."""
    if value is not None:
        display(value)


def _section_of_cell_id(cell_id):
    """(known, section) for a cell id the front end sent; unknown ids (a learner's own cells) give (False, None)."""
    try:
        return True, section_of(cell_id)
    except KeyError:
        return False, None


def _before_cell(info):
    """Which section the cell belongs to: its id where the front end sends a notebook id (JupyterLab, VS Code;
    Colab and nbclient send none), else the section it ran in before, else the section opened last."""
    source = info.raw_cell or ""
    known, number = _section_of_cell_id(getattr(info, "cell_id", None))
    if not known:
        number = GUARD["seen"].get(source, GUARD["open"])
    GUARD["seen"].setdefault(source, number)
    GUARD["cell"], GUARD["opened"] = number, GUARD["open"]
    shell = get_ipython()
    skipping = shell is not None and bool(shell.user_ns.get("NCU_ONLY_SKIP"))
    GUARD["skip"] = skipping and source.lstrip().startswith(NCU_ONLY_CELL_MARK)


def _after_cell(result):
    if GUARD["open"] != GUARD.get("opened"):  # the cell opened a section: that is where it belongs
        GUARD["seen"][result.info.raw_cell or ""] = GUARD["open"]


class SectionGuard(ast.NodeTransformer):
    """Wrap a section's cell in try/except, charged to that section, without changing what the learner wrote.

    A cell marked as needing Nsight Compute (its first line) runs nothing when this run uses CUPTI.
    """

    def visit_Module(self, module):
        number = GUARD["cell"]
        if GUARD["skip"]:
            module.body = [ast.Pass()]
            return ast.fix_missing_locations(module)
        if number is None or number in GUARD["unguarded"] or not module.body:
            return module
        body = list(module.body)
        if isinstance(body[-1], ast.Expr):
            last = body[-1]
            shown = ast.copy_location(ast.Call(ast.Name("show_last", ast.Load()), [last.value], []), last.value)
            body[-1] = ast.copy_location(ast.Expr(shown), last)
        handler = ast.ExceptHandler(
            ast.Name("Exception", ast.Load()),
            "section_error",
            ast.parse(f"if not cell_failed(section_error, {number}):\n    raise").body,
        )
        guarded = ast.Try(body=body, handlers=[handler], orelse=[], finalbody=[])
        # The try spans the cell's own lines, so that a traceback points at the line that raised.
        guarded.lineno, guarded.col_offset = body[0].lineno, body[0].col_offset
        guarded.end_lineno, guarded.end_col_offset = body[-1].end_lineno, body[-1].end_col_offset
        for node in ast.walk(handler):
            if "lineno" in node._attributes:
                node.lineno = node.end_lineno = body[-1].end_lineno
                node.col_offset = node.end_col_offset = 0
        module.body = [guarded]
        return ast.fix_missing_locations(module)


def install_section_guard(shell=None):
    shell = shell or get_ipython()
    if shell is None:  # plain Python (a script running these cells): nothing to guard
        return
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if type(t).__name__ != "SectionGuard"]
    shell.ast_transformers.append(SectionGuard())
    for event, callback in (("pre_run_cell", _before_cell), ("post_run_cell", _after_cell)):
        for registered in list(shell.events.callbacks[event]):
            if getattr(registered, "__name__", "") == callback.__name__:  # a second Run all replaces, never stacks
                shell.events.unregister(event, registered)
        shell.events.register(event, callback)
    shell.set_custom_exc((NameError,), _name_error_outside_sections)


def _record_if_ok(number, record):
    if SECTIONS.get(number, {}).get("status") != "ok":
        return None
    try:
        return record()
    except Exception as error:  # the summary reports it; Run all goes on (after the last section, it stops)
        if not cell_failed(error, number):
            raise
        return None


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


def report_summary(strict):
    """The notebook's last cell: close the sections, write summary.json, show the sections and the figures against
    the datasheet. Strict mode (NSPY_TUTORIAL_STRICT=1) raises here on a FAILED or NOT RUN section or a SUSPECT figure.
    """
    end_sections()
    summary, path = write_summary(strict=strict)
    table = pd.DataFrame(summary["sections"])[["number", "title", "status", "seconds"]]
    print(table.round(1).to_string(index=False))
    print("\nheadline of each section (SKIPPED and FAILED ones give their reason):")
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


if __name__ == "__main__":  # the notebook's cell: make the output folder, guard the sections
    prepare_output_dir(OUT_DIR)
    pd.set_option("display.width", 120)  # tables fit a 120-character page
    pd.set_option("display.max_columns", 12)
    install_section_guard()
    print(f"Output folder: {OUT_DIR}")
