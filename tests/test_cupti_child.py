"""Section 9's CUPTI child: a stand-in Python, the real child on this CPU machine, nsight on two kernels a call."""

import ast
import builtins
import inspect
import json
import os
import symtable

import nsight
import numpy as np
import pytest
from fakes import build_fake_injection_library, cupti_child_python
from nsight import extraction, transformation, utils

from plumbing import setup_helpers

SIZES = [512, 1024]
# Per call of the benchmark, the two kernels cuBLAS may launch (a GEMM and its split-K reduction), in ns.
GEMM_NS = {512: 100.0, 1024: 700.0}
REDUCE_NS = 10.0


def product(n):  # the benchmark the child times (CUPTI's records stand for its kernels)
    pass


@pytest.fixture
def child(tmp_path, monkeypatch):
    """(libcupti.so.13 in the CUPTI folder, a stand-in Python for the child, the file it records itself in)."""
    monkeypatch.setattr(setup_helpers, "CUPTI_PACKAGES_DIR", tmp_path / "cupti")
    libcupti, python, record = tmp_path / "cupti/nvidia/cu13/lib/libcupti.so.13", tmp_path / "python", tmp_path / "c"
    libcupti.parent.mkdir(parents=True)
    libcupti.touch()
    cupti_child_python(python, record)
    return libcupti, str(python), record


def test_the_child_runs_its_program_on_the_benchmark_with_a_clean_environment_and_its_libcupti_is_checked(
    tmp_path, monkeypatch, child
):
    libcupti, python, record = child
    monkeypatch.setenv("PYTHONPATH", "/packages")
    for left_by_ncu in ("NVTX_INJECTION64_PATH", "NV_COMPUTE_PROFILER_DISABLE_STOCK_FILE_DEPLOYMENT"):
        monkeypatch.setenv(left_by_ncu, "/ncu/lib")
    resolved, folder = tmp_path / "resolved.so", tmp_path / "s9_cupti"
    resolved.symlink_to(libcupti)  # nsight may name the preloaded file by another path
    monkeypatch.setenv("FAKE_LIBCUPTI", str(resolved))
    parent_env = dict(os.environ)
    assert setup_helpers.run_cupti_child(product, SIZES, folder, python=python)["libcupti"] == str(resolved)
    assert os.environ == parent_env, "the parent's own environment must stay as it was"
    argv, env = (json.loads(record.read_text())[key] for key in ("argv", "env"))
    program, benchmark = str(folder / "cupti_child.py"), str(folder / "benchmark.py")
    assert argv[1:] == [program, benchmark, "product", "[512, 1024]", f"{folder}/"], argv
    assert not [k for k in env if k.startswith(("NVTX_INJECTION", "NV_COMPUTE_PROFILER"))], "Nsight Compute's leftovers"
    wanted = {
        "PYTHONPATH": f"{tmp_path / 'cupti'}{os.pathsep}/packages",
        "NSPY_NCU_INIT_AT_IMPORT": "0",
        "NSPY_TUTORIAL_LIBCUPTI": str(libcupti),
        "MPLBACKEND": "Agg",
    }
    assert wanted.items() <= env.items(), "CUPTI's packages first, its libcupti, no Nsight Compute"
    tree, namespace = ast.parse(source := (folder / "cupti_child.py").read_text()), {}
    assert ast.unparse(tree.body[-1]) == "cupti_child(*sys.argv[1:])", "the program must call cupti_child"
    exec(compile(ast.Module(tree.body[:-1], []), program, "exec"), namespace)
    inspect.signature(namespace["cupti_child"]).bind(*argv[2:])
    table = symtable.symtable(source, program, "exec").lookup("cupti_child").get_namespace()
    used = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_global() and symbol.is_referenced()}
    assert not used - set(namespace) - set(dir(builtins)), "the child's program lacks imports: see CHILD_IMPORTS"
    exec(compile((folder / "benchmark.py").read_text(), benchmark, "exec"), benchmark_namespace := {})
    assert callable(benchmark_namespace["product"]), "benchmark.py must define the benchmark the child times"
    monkeypatch.setenv("FAKE_LIBCUPTI", "/torch/lib/libcupti.so.12")
    with pytest.raises(RuntimeError, match=r"CUPTI bound to '/torch/lib/libcupti.so.12', not the preloaded .*so\.13"):
        setup_helpers.run_cupti_child(product, SIZES, folder, python=python)


def test_the_child_run_on_a_machine_without_cupti_fails_with_its_own_error(tmp_path, child):
    """The real child loads libcupti, imports nsight and fails to activate CUPTI (no cupti-python here)."""
    built = build_fake_injection_library(tmp_path / "built")
    if built is None:
        pytest.skip("no C compiler here to build a loadable libcupti.so.13 (.ci/run's image has one)")
    child[0].write_bytes(built.read_bytes())
    folder = tmp_path / "s9_cupti"
    with pytest.raises(RuntimeError, match=r"(?s)the CUPTI child failed \(exit 1\): .*cupti-python is required"):
        setup_helpers.run_cupti_child(product, [512], folder)
    assert not (folder / "child_result.json").exists(), "a child that failed must leave no result to be read"


def test_a_call_that_launches_two_kernels_is_timed_as_their_sum():
    """cuBLAS may launch two kernels a call: nsight's own extraction and aggregation, with cupti_child's options."""
    tree = ast.parse(inspect.getsource(setup_helpers.cupti_child))
    given = next(node for node in ast.walk(tree) if isinstance(node, ast.Assign) and node.targets[0].id == "options")
    options = eval(compile(ast.Expression(given.value), "cupti_child", "eval"))  # noqa: S307 - the child's own dict
    runs, silent = options["runs"], nsight.VerbosityLevel.SILENT
    records = {
        "product": [
            utils.ActionData(
                name=name, values=np.array([ns]), compute_clock=1, memory_clock=1, gpu="H200", units=["ns"]
            )
            for n in SIZES
            for run in range(runs)
            for name, ns in (("gemm", GEMM_NS[n] + run), ("splitk", REDUCE_NS))
        ]
    }
    configs, combine = [(n,) for n in SIZES], options["combine_kernel_metrics"]
    raw = extraction.extract_df_from_data(
        records, ["gpu__time_duration.sum"], configs, runs, product, None, silent, combine
    )
    rows = transformation.aggregate_data(raw, product, None, silent).to_dict("records")
    expected = {n: GEMM_NS[n] + (runs - 1) / 2 + REDUCE_NS for n in SIZES}  # mean over the runs of the sum
    assert {row["n"]: row["AvgValue"] for row in rows} == pytest.approx(expected), "not the kernels' sum"
    assert all(row["Kernel"] == "gemm|splitk" and row["RelativeStdDevPct"] > 0 for row in rows), "both kernels' spread"
