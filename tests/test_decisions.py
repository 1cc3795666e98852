"""Decisions outside section 1 that a careless one-line edit could break silently.

The datasheet peaks, the SUSPECT bounds, strict mode from its environment variable to the raised error,
the GPU test's rule of which sections each backend may skip, and the wheelhouse's CUPTI set. The harness
cell and the summary cell run for real in a kernel; the wheelhouse script runs against a recording pip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, cell_by_id
from kernel_session import CellError, KernelSession
from test_notebook_gpu import NCU_ONLY_SECTIONS, section_problems

# Vendor datasheet peaks, dense (environments.md, "Datasheet peaks"): fp32, fp16 tensor (TFLOP/s), DRAM (GB/s).
DATASHEET = {
    "Tesla T4": ("T4", 8.1, 65.0, 320.0),
    "NVIDIA L4": ("L4", 30.3, 121.0, 300.0),
    "NVIDIA A100-SXM4-40GB": ("A100 40GB SXM", 19.5, 312.0, 1555.0),
    "NVIDIA A100-SXM4-80GB": ("A100 80GB SXM", 19.5, 312.0, 2039.0),
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 67.0, 989.0, 3350.0),
    "NVIDIA H200": ("H200 SXM", 67.0, 989.0, 4800.0),
}


@pytest.fixture(scope="module")
def harness(notebook, tmp_path_factory):
    """One kernel with the real harness cell, shared by the read-only checks below."""
    out = tmp_path_factory.mktemp("decisions")
    with KernelSession(env={"NSPY_TUTORIAL_OUT": str(out / "out"), "NSPY_TUTORIAL_STRICT": ""}, cwd=out) as session:
        session.run(cell_by_id(notebook, "harness").source)
        yield session


@pytest.mark.parametrize("gpu", sorted(DATASHEET))
def test_datasheet_peaks_match_the_vendor_figures(harness, gpu):
    label, fp32, fp16, dram = DATASHEET[gpu]
    found_label, peaks = harness.value(f"lookup_peaks({gpu!r})")
    assert found_label == label
    assert peaks == {"fp32_tflops": fp32, "fp16_tflops": fp16, "dram_gbs": dram}, f"{gpu}: {peaks}"


@pytest.mark.parametrize(
    ("pct", "check"),
    [(4.9, "SUSPECT"), (5.0, "ok"), (50.0, "ok"), (100.0, "ok"), (100.1, "SUSPECT"), (float("nan"), "SUSPECT")],
)
def test_suspect_bounds_on_both_sides(harness, pct, check):
    # 320 GB/s is the T4's DRAM peak, so value = pct% of it.
    harness.run("# @title set-up\nENVIRONMENT['gpu'] = 'Tesla T4'")
    figure = harness.value(f"record_figure(6, 'bound check', 3.2 * float({str(pct)!r}), 'GB/s', 'dram_gbs')")
    assert figure["check"] == check, f"{pct}% of peak was judged {figure['check']}"


def _summary_run(notebook, tmp_path, strict_value):
    """The harness, one FAILED section, then the notebook's own summary cell."""
    env = {"NSPY_TUTORIAL_OUT": str(tmp_path / "out")}
    if strict_value is not None:
        env["NSPY_TUTORIAL_STRICT"] = strict_value
    session = KernelSession(env=env, cwd=tmp_path)
    try:
        session.run(cell_by_id(notebook, "harness").source)
        session.run("# @title a broken section\nbegin_section(2, 'two')")
        session.run("raise RuntimeError('boom')")  # the guard marks section 2 FAILED; no CellError
    except BaseException:
        session.close()
        raise
    return session


@pytest.mark.parametrize(("strict_value", "raises"), [("1", True), ("0", False), (None, False), ("yes", False)])
def test_strict_mode_from_the_environment_variable_to_the_raised_error(notebook, tmp_path, strict_value, raises):
    session = _summary_run(notebook, tmp_path, strict_value)
    try:
        if raises:
            with pytest.raises(CellError) as raised:
                session.run(cell_by_id(notebook, "summary-code").source)
            assert (
                raised.value.ename == "RuntimeError" and "section 2 FAILED: RuntimeError: boom" in raised.value.evalue
            )
        else:
            output = session.run(cell_by_id(notebook, "summary-code").source)
            assert "not clean" in output and "section 2 FAILED" in output
        assert json.loads((tmp_path / "out" / "summary.json").read_text())["strict"] is raises
    finally:
        session.close()


# ---------------------------------------------------------------- the GPU test's rule per backend
def _summary(profiler, skipped=(), failed=()):
    sections = [
        {
            "number": n,
            "title": f"s{n}",
            "status": "SKIPPED" if n in skipped else "FAILED" if n in failed else "ok",
            "reason": "",
            "environment_limit": n in skipped,
        }
        for n in range(1, 11)
    ]
    return {"environment": {"profiler": profiler}, "sections": sections}


def test_cupti_run_must_skip_exactly_the_ncu_only_sections():
    assert NCU_ONLY_SECTIONS == {4, 6, 7, 10}
    assert section_problems(_summary("cupti", skipped={4, 6, 7, 10})) == []
    assert section_problems(_summary("cupti", skipped={4, 5, 6, 7, 10})), "a section that quietly skipped passed"
    assert section_problems(_summary("cupti", skipped={4, 6, 7})), "section 10 cannot run under CUPTI"


def test_ncu_run_must_skip_nothing():
    assert section_problems(_summary("ncu")) == []
    assert section_problems(_summary("ncu", skipped={10})), "under Nsight Compute nothing may be skipped"
    assert section_problems(_summary("ncu", failed={3}))
    assert section_problems(_summary(None)), "a summary without a backend must not pass"


# ---------------------------------------------------------------- the wheelhouse
RECORDING_PIP = textwrap.dedent(
    """\
    import json, re, sys
    from pathlib import Path

    args = sys.argv[1:]
    with open({log!r}, "a") as log:
        log.write(json.dumps(args) + "\\n")
    dest = Path(args[args.index("--dest") + 1])
    for arg in args:
        if re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9.]*", arg):
            name, version = arg.split("==")
            (dest / f"{{name.replace('-', '_')}}-{{version}}-py3-none-any.whl").write_text("")
    """
)


def test_make_wheelhouse_fetches_the_cupti_set_into_its_own_folder(tmp_path):
    shim = tmp_path / "shim" / "pip"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("")
    log = tmp_path / "pip.log"
    (shim / "__main__.py").write_text(RECORDING_PIP.format(log=str(log)))
    dest = tmp_path / "wheelhouse"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shim")}
    command = [
        sys.executable,
        str(ROOT / "scripts/make_wheelhouse.py"),
        "--dest",
        str(dest),
        "--python-version",
        "3.13",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    cupti_call = next(call for call in calls if str(dest / "cupti") in call)
    assert "--no-deps" in cupti_call and "3.13" in cupti_call
    cupti_wheels = sorted(path.name.split("-")[0] for path in (dest / "cupti").glob("*.whl"))
    assert cupti_wheels == ["cuda_bindings", "cupti_python", "nvidia_cuda_cupti", "pyelftools"]
    main_wheels = {path.name.split("-")[0] for path in dest.glob("*.whl")}
    assert {"nsight_python", "cuda_core", "ncu_report", "nvidia_ml_py"} <= main_wheels
