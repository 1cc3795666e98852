"""What the notebook asks of Nsight Compute, as ncu receives it: the notebook's own define and run cells, with nsight
driven through the recorder's launch-mode patches (a stand-in ncu records its command line), or section 10's own
command line run against a stand-in ncu. No GPU: each call stops after ncu, where the report would be read.
"""

from __future__ import annotations

import json
import math
import re
import sys

import pytest
import recordings
from support import ncu_namespace

CELLS = recordings.load_cells()
NCU_RECORDING = recordings.recording_folders("ncu")


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def ncu_argv_of(benchmark, log) -> list[str]:
    with pytest.raises(Exception):  # noqa: B017 - no GPU, no report: nsight's extraction fails after ncu ran
        benchmark()
    assert log.exists(), "nsight never started ncu"
    argv = json.loads(log.read_text())
    log.unlink()
    return argv


def test_s7_control_call_keeps_the_caches_while_the_measured_call_flushes_them(patched):
    calls, log, _ = patched
    namespace = ncu_namespace("s7-define")
    calls.where = (7, "s7-run")
    flushed = ncu_argv_of(namespace["fusion_benchmark"], log)
    calls.where = (7, "s7-run-unflushed")
    control = ncu_argv_of(namespace["unflushed_fusion"], log)
    assert option(flushed, "--cache-control") == "all", "section 7's measured call must flush the caches"
    assert option(control, "--cache-control") == "none", (
        "section 7's control (written, no flush) must keep the caches: cache_control='none' in fusion_call"
    )


STAND_IN_NCU = """#!{python}
# Stands in for the ncu command line: keeps its arguments and writes the report it was asked for.
import json, sys
args = sys.argv[1:]
open({log!r}, "w").write(json.dumps(args))
open(args[args.index("-o") + 1] + ".ncu-rep", "wb").write(b"report")
"""


def recorded_fused_kernel() -> str:
    """The demangled name (as far as it was printed) of the kernel section 10's ncu matched on the GPU runner."""
    output = recordings.load_recording(NCU_RECORDING[0])["cells"]["s10-summary"]["output"]
    return output.split(": ", 1)[1].split("...", 1)[0]


def matches(kernel_filter: str, name: str) -> bool:
    """ncu --kernel-name: 'regex:<expression>' searches the name, anything else must equal it."""
    if kernel_filter.startswith("regex:"):
        return re.search(kernel_filter.removeprefix("regex:"), name) is not None
    return kernel_filter == name


@pytest.mark.skipif(not NCU_RECORDING, reason="no docs/verified/*-ncu-*/recording.json")
def test_s10_own_ncu_leaves_the_clocks_alone_and_matches_the_fused_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    log, ncu = tmp_path / "argv.json", tmp_path / "ncu"
    ncu.write_text(STAND_IN_NCU.format(python=sys.executable, log=str(log)))
    ncu.chmod(0o755)
    namespace = ncu_namespace("s7-define", "s10-define", ENVIRONMENT={"ncu_path": str(ncu)})
    recordings.run_cell(namespace, recordings.cell_source(CELLS, "s10-profile"), "s10-profile", echo=False)
    argv = json.loads(log.read_text())
    assert option(argv, "--clock-control") == "none", (
        f"section 10's ncu must leave the GPU's clocks as they are (--clock-control none), got {argv}"
    )
    assert option(argv, "--kernel-name-base") == "demangled"
    name = recorded_fused_kernel()
    assert matches(option(argv, "--kernel-name"), name), (
        f"--kernel-name {option(argv, '--kernel-name')} matches no kernel named like the fused one ({name}): "
        "ncu takes a bare name as an exact match; a pattern needs regex:"
    )
    assert "addcmul" in name and not matches(option(argv, "--kernel-name"), name.replace("addcmul", "mul"))


@pytest.mark.skipif(not NCU_RECORDING, reason="no docs/verified/*-ncu-*/recording.json")
def test_s5_normalize_against_divides_each_float16_time_by_the_float32_time_of_its_size(tmp_path, monkeypatch):
    """Section 5's ratio call, rebuilt by nsight's own aggregation from the raw frames the runner's ncu measured
    (served as the recorder's inner process serves earlier calls): Normalized is float16's time over float32's."""
    import pickle

    import ncu_launch
    from nsight.collection import ncu as nsight_ncu

    recording = recordings.load_recording(NCU_RECORDING[0])
    raw = [recordings.decode(call["raw_frame"]) for call in recording["calls"] if call["cell"] == "s5-ratio"]
    work = tmp_path / "work"
    (work / "calls").mkdir(parents=True)
    for index, frame in enumerate(raw):
        (work / "calls" / f"5-{index}.pkl").write_bytes(pickle.dumps(("frame", frame)))
    monkeypatch.setenv("NSPY_TUTORIAL_OUT", str(tmp_path / "out"))
    monkeypatch.setattr(nsight_ncu, "injection_load_error", None)  # as imported with NSPY_NCU_INIT_AT_IMPORT=0
    namespace = ncu_namespace("s5-define", "s5-each", "s5-normalize")
    calls = ncu_launch.ProfiledCalls(work, "inner", target="5-none", log=lambda *_: None)
    calls.install()
    calls.where = (5, "s5-ratio")
    try:
        frame = namespace["profile_each"](namespace["ratio_benchmark"], namespace["SWEEP_SIZES"])
    finally:
        calls.uninstall()
    assert len(raw) == len(namespace["SWEEP_SIZES"]), "one recorded call per size"
    for measured in raw:  # each size's runs, as ncu measured them (ns)
        n = int(measured.n.iloc[0])
        float16, float32 = (measured[measured.Annotation == name].Value.mean() for name in ("float16", "float32"))
        row = frame[(frame.n == n) & (frame.Annotation == "float16")].iloc[0]
        assert math.isclose(row["AvgValue"], float16 / float32, rel_tol=1e-9), (
            f"n={n}: the float16 row reads {row['AvgValue']}, not float16's mean time over float32's "
            f"({float16 / float32}): section 5's ratio call must use normalize_against='float32'"
        )
        assert math.isclose(row["NormalizationValue"], float32, rel_tol=1e-9) and row["Normalized"] == "float32"


@pytest.mark.skipif(not NCU_RECORDING, reason="no docs/verified/*-ncu-*/recording.json")
def test_s10_stall_profile_skips_the_warm_up_launch_and_profiles_the_next_of_section_6s_furthest_kernel(
    notebook, tmp_path
):
    """s10-stalls-profile on section 6's recorded values, against a stand-in ncu: the script it writes launches the
    kernel once per work() call; ncu must skip the warm-up launch and profile the one after it."""
    from support import RecordedNotebook, cell_by_id

    log, ncu = tmp_path / "argv.json", tmp_path / "ncu"
    ncu.write_text(STAND_IN_NCU.format(python=sys.executable, log=str(log)))
    ncu.chmod(0o755)
    runner = RecordedNotebook(notebook, NCU_RECORDING[0], tmp_path)
    try:
        runner.section(6)
        runner.session.run(f"ENVIRONMENT = {{**ENVIRONMENT, 'ncu_path': {str(ncu)!r}}}")
        for cell_id in ("s10-define", "s10-stalls-profile"):
            runner.session.run(cell_by_id(notebook, cell_id).source)
        furthest = runner.value("limits_table['% of roof'].idxmin()")
        kernel = runner.value("limits_frame.set_index('Annotation').Kernel.to_dict()")[furthest]
        script = runner.value("str(stalls_dir / 'workload.py')")
    finally:
        runner.close()
    argv = json.loads(log.read_text())
    launches = sum(line.strip() == "work()" for line in open(script).read().splitlines())
    assert option(argv, "--clock-control") == "none", f"the runner's clocks stay as they are: {argv}"
    assert (option(argv, "--kernel-name-base"), option(argv, "--kernel-name")) == ("function", kernel), argv
    assert launches >= 2 and option(argv, "--launch-count") == "1", f"a warm-up launch, then the profiled one: {argv}"
    assert int(option(argv, "--launch-skip")) == launches - 1, (
        f"the script launches {kernel} {launches} times: --launch-skip {launches - 1} profiles the last, after the "
        f"warm-up; ncu got --launch-skip {option(argv, '--launch-skip')}"
    )
