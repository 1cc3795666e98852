"""Section 9's CUPTI child (plumbing/cupti_child.py) as a program under test.

What it reports comes from the real nsight: its extraction and aggregation turn kernel times, as CUPTI hands them
over, into the rows the child writes. How it fails: run for real on this CPU machine (no CUPTI, no GPU) it exits with
its own error, and a child that hangs is stopped at its time limit.
"""

from __future__ import annotations

import os
import sys

import nsight
import numpy as np
import pytest
from fake_env import build_fake_injection_library
from kernel_session import ends_soon
from nsight import extraction, transformation, utils
from support import ROOT

from plumbing import cupti_child, setup_helpers

SIZES = (512, 1024)
# Per call of the benchmark, the two kernels cuBLAS may launch (a GEMM and its split-K reduction), in ns.
GEMM_NS = {512: 100.0, 1024: 700.0}
REDUCE_NS = 10.0


def product(n):
    """The benchmark the child times (its body does not run here: CUPTI's records stand for its kernels)."""
    del n


def kernel_records(runs):
    """What nsight's CUPTI collector hands to extraction: per size and run, the two kernels of one annotated call."""
    records = []
    for n in SIZES:
        for run in range(runs):
            for name, ns in (("gemm_kernel", GEMM_NS[n] + run), ("splitk_reduce", REDUCE_NS)):
                records.append(
                    utils.ActionData(name=name, values=np.array([ns]), compute_clock=1, memory_clock=1,
                                     gpu="NVIDIA H200", units=["ns"])
                )  # fmt: skip
    return {"product": records}


def measured_rows(options):
    """The rows the child writes for kernel_records, through nsight's own extraction and aggregation."""
    raw = extraction.extract_df_from_data(
        kernel_records(options["runs"]), ["gpu__time_duration.sum"], [(n,) for n in SIZES], options["runs"], product,
        None, options["verbosity"], options.get("combine_kernel_metrics"),
    )  # fmt: skip
    stacked = transformation.aggregate_data(raw, product, None, options["verbosity"])
    return cupti_child.child_result(stacked, 1.5, "Tool.CUPTI", {"NVTX_INJECTION64_PATH": "/lib/libcupti.so.13"})


def test_a_call_that_launches_two_kernels_is_timed_as_their_sum():
    """Where cuBLAS launches two kernels in one call, section 9 compares their sum with Nsight Compute's."""
    options = {**cupti_child.PROFILING_OPTIONS, "verbosity": nsight.VerbosityLevel.SILENT}
    assert options.get("combine_kernel_metrics") is not None, (
        "the child must give nsight combine_kernel_metrics: without it nsight refuses a call with two kernels"
    )
    result = measured_rows(options)
    runs = options["runs"]
    expected = {n: GEMM_NS[n] + (runs - 1) / 2 + REDUCE_NS for n in SIZES}  # mean over the runs of the sum
    got = {row["n"]: row["AvgValue"] for row in result["rows"]}
    assert got == pytest.approx(expected), f"each size's time must be the two kernels' sum, averaged: {got}"
    assert all(row["Kernel"] == "gemm_kernel|splitk_reduce" for row in result["rows"]), result["rows"]
    spreads = [row["RelativeStdDevPct"] for row in result["rows"]]
    assert all(spread > 0 for spread in spreads), (
        f"section 9 shows each size's spread over the child's runs; one run has none to show: {spreads}"
    )
    assert (result["wall_s"], result["tool"]) == (1.5, "Tool.CUPTI")


def test_without_combining_nsight_refuses_two_kernels_in_one_call():
    """Why the option matters: the same records without it stop section 9 on every GPU where cuBLAS splits."""
    options = {
        **{**cupti_child.PROFILING_OPTIONS, "verbosity": nsight.VerbosityLevel.SILENT},
        "combine_kernel_metrics": None,
    }
    with pytest.raises(RuntimeError, match="More than one .*kernel is launched"):
        measured_rows(options)


def test_the_child_reports_the_libcupti_nsight_handed_to_nvtx_not_the_one_it_was_asked_to_load():
    """The parent compares this path with the preloaded one: a wrong libcupti must not pass for the right one."""
    stacked = transformation.aggregate_data(
        extraction.extract_df_from_data(
            kernel_records(1), ["gpu__time_duration.sum"], [(n,) for n in SIZES], 1, product, None,
            nsight.VerbosityLevel.SILENT, cupti_child.add_kernel_times,
        ), product, None, nsight.VerbosityLevel.SILENT,
    )  # fmt: skip
    environ = {"NVTX_INJECTION64_PATH": "/torch/lib/libcupti.so.12", "NSPY_TUTORIAL_LIBCUPTI": "/cupti/libcupti.so.13"}
    assert cupti_child.child_result(stacked, 0.1, "cupti", environ)["libcupti"] == "/torch/lib/libcupti.so.12"
    assert cupti_child.child_result(stacked, 0.1, "cupti", {})["libcupti"] == "", "no library handed over: say none"


def cupti_folder(tmp_path, monkeypatch):
    """A CUPTI install folder whose libcupti.so.13 really loads (a small shared library built here)."""
    monkeypatch.setattr(setup_helpers, "CUPTI_PACKAGES_DIR", tmp_path / "cupti")
    built = build_fake_injection_library(tmp_path / "built")
    if built is None:
        pytest.skip("no C compiler here to build a loadable libcupti.so.13 (.ci/run's image has one)")
    libcupti = tmp_path / "cupti" / "nvidia" / "cu13" / "lib" / "libcupti.so.13"
    libcupti.parent.mkdir(parents=True)
    libcupti.write_bytes(built.read_bytes())
    return libcupti


def test_the_child_run_on_a_machine_without_cupti_fails_with_its_own_error(tmp_path, monkeypatch):
    """The real child in a fresh Python on this CPU machine: cupti-python and a GPU are missing, so it must exit
    non-zero, write no result, and the notebook's error must quote the child's own last lines."""
    cupti_folder(tmp_path, monkeypatch)
    child = (ROOT / "plumbing" / "cupti_child.py").read_text()
    folder = tmp_path / "s9_cupti"
    with pytest.raises(RuntimeError, match=r"the CUPTI child exited with 1; its last lines: .*Error") as failure:
        setup_helpers.run_cupti_child(product, [512], folder, child, python=sys.executable)
    assert "cupti" in str(failure.value).lower(), f"the child's error must name what is missing: {failure.value}"
    assert not (folder / "child_result.json").exists(), "a child that failed must leave no result to be read"


HANGING_PYTHON = """#!{python}
import os, sys, time
open({pid_file!r}, "w").write(str(os.getpid()))
time.sleep(120)
"""


def test_a_hung_child_is_stopped_at_its_time_limit_and_named(tmp_path, monkeypatch):
    cupti_folder(tmp_path, monkeypatch)
    pid_file = tmp_path / "child.pid"
    python = tmp_path / "python"
    python.write_text(HANGING_PYTHON.format(python=sys.executable, pid_file=str(pid_file)))
    python.chmod(0o755)
    monkeypatch.setitem(setup_helpers.TIME_LIMITS_S, "cupti_child", 2)
    with pytest.raises(RuntimeError, match="the CUPTI child did not finish within 2 s and was stopped"):
        setup_helpers.run_cupti_child(product, [512], tmp_path / "out", "", python=str(python))
    assert pid_file.exists(), "the stand-in child never started"
    assert ends_soon(int(pid_file.read_text())), "the hung child lives on after its time limit"
    assert os.environ.get("NSPY_TUTORIAL_LIBCUPTI") is None, "the parent's own environment must stay as it was"
