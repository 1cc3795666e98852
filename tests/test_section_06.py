"""Section 6, what holds a kernel back: today's table and verdict cells on a real Nsight Compute run's frame."""

import evidence
import pandas as pd
import pytest
from pytest import approx
from support import parse, run_cells, verdicts

VERDICT = "the softmax moved its bytes at {}% of x * 2.0's rate; its busier unit by counter: {}"
PEAK = "throughput.avg.pct_of_peak_sustained_elapsed"
COUNTERS = ["gpu__time_duration.sum", f"sm__{PEAK}", f"dram__{PEAK}"]
MUST_MOVE = {"fp16 matmul": 4 * 4096**2, "x * 2.0": 8 * 2**26, "softmax": 8 * 2**23}  # one fp16 in + out: 2+2 n^2


def bound(frame, gpu="Tesla T4"):
    namespace = {"pd": pd, "gpu": gpu, "COUNTERS": COUNTERS, "bound_frame": frame}
    return verdicts(run_cells(["s6-table", "s6-verdict"], namespace)), namespace


def test_the_verdict_compares_the_softmaxs_bytes_moved_rate_with_x_times_two_and_names_its_busier_counter():
    folder = evidence.run_with("s6_bound")
    (frame,) = evidence.written(folder, "s6_bound")
    said, namespace = bound(frame, evidence.gpu(folder))
    time_ns = frame[frame.Metric == "gpu__time_duration.sum"].set_index("Annotation").AvgValue
    rate = {name: MUST_MOVE[name] / time_ns[name] for name in MUST_MOVE}
    share, busier = parse(VERDICT, said)
    assert share == approx(100 * rate["softmax"] / rate["x * 2.0"], abs=0.51), said
    counters = frame[frame.Annotation == "softmax"].set_index("Metric").AvgValue
    assert busier == ("SM %" if counters[COUNTERS[1]] > counters[COUNTERS[2]] else "DRAM %"), said
    assert namespace["bound"]["GB/s moved"].to_dict() == approx(rate), "bytes it must move per ns are GB/s"


@pytest.mark.parametrize("sm, dram, busier", [(44.0, 62.0, "DRAM %"), (70.0, 20.0, "SM %")])
def test_the_busier_unit_is_the_larger_counter_of_the_softmax(sm, dram, busier):
    (frame,) = evidence.written(evidence.run_with("s6_bound"), "s6_bound")
    for metric, value in ((COUNTERS[1], sm), (COUNTERS[2], dram)):
        frame.loc[(frame.Annotation == "softmax") & (frame.Metric == metric), "AvgValue"] = value
    assert parse(VERDICT, bound(frame)[0])[1] == busier, f"SM {sm}%, DRAM {dram}%"
