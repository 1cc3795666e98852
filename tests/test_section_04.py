"""Section 4, flush and clock lock: today's table and verdict cells on the frames of a real Nsight Compute run."""

import evidence
import pandas as pd
import pytest
from pytest import approx
from support import parse, run_cells, verdicts

VERDICT = "cold / warm time {}; base clock {} the SMs ({} against {} MHz)"
METRICS = {"gpu__time_duration.sum": "ns", "gpc__cycles_elapsed.avg.per_second": "hz", "dram__bytes_read.sum": "byte"}


def conditions(frames, gpu="Tesla T4"):
    namespace = {"pd": pd, "gpu": gpu, "METRICS": list(METRICS), "frames": frames}
    return verdicts(run_cells(["s4-table", "s4-verdict"], namespace)), namespace


def recorded():
    folder = evidence.run_with("s4_cold")
    return folder, {name: evidence.written(folder, f"s4_{name}")[0] for name in ("cold", "warm", "base")}


def test_the_verdict_compares_cold_and_warm_times_per_size_and_the_clock_each_ran_at():
    folder, frames = recorded()
    said, _ = conditions(frames, evidence.gpu(folder))
    time_ns = {
        name: frame[frame.Metric == "gpu__time_duration.sum"].set_index("n").AvgValue for name, frame in frames.items()
    }
    ratios = ", ".join(
        f"{4 * n / 1e6:.1f} MB {time_ns['cold'][n] / time_ns['warm'][n]:.2f}x" for n in time_ns["cold"].index
    )
    shown = parse(VERDICT, said)
    assert shown[0] == ratios, f"cold over warm time, each size in MB: {said}"
    units = {unit for frame in frames.values() for unit in frame.Unit}
    assert units == set(METRICS.values()), "the table's factors assume ns, Hz and bytes"


@pytest.mark.parametrize("share, said", [(0.5, "lowered"), (0.95, "did not lower")])
def test_base_clock_is_said_to_lower_the_sms_only_where_the_measured_clock_fell(share, said):
    _, frames = recorded()
    clock = "gpc__cycles_elapsed.avg.per_second"
    cold_mhz = frames["cold"][frames["cold"].Metric == clock].AvgValue.mean() / 1e6
    frames["base"].loc[frames["base"].Metric == clock, "AvgValue"] = share * cold_mhz * 1e6  # base clocks, as measured
    shown = parse(VERDICT, conditions(frames)[0])
    assert shown[1:] == [said, approx(share * cold_mhz, abs=0.5), approx(cold_mhz, abs=0.5)], shown
