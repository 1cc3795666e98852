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


def test_the_verdict_compares_cold_and_warm_times_per_size_and_the_clock_each_ran_at():
    folder = evidence.run_with("s4_cold")
    frames = {name: evidence.written(folder, f"s4_{name}")[0] for name in ("cold", "warm", "base")}
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


def synthetic(base_mhz):
    """Three sizes, 10 runs each, as nsight's frames hold them: cold slower than warm at the small sizes."""
    rows = {"cold": (9.0, 1980.0), "warm": (6.0, 1980.0), "base": (9.5, base_mhz)}
    return {
        name: pd.DataFrame(
            [
                {"Annotation": "x * 2.0", "Metric": metric, "n": n, "AvgValue": value, "Unit": unit}
                for n in (2**18, 2**19, 2**26)
                for metric, unit in METRICS.items()
                for value in [{"ns": time_us * 1e3 * (1 + n / 2**20), "hz": mhz * 1e6, "byte": 4.0 * n}[unit]]
            ]
        )
        for name, (time_us, mhz) in rows.items()
    }


@pytest.mark.parametrize("base_mhz, said", [(585.0, "lowered"), (1975.0, "did not lower")])
def test_base_clock_is_said_to_lower_the_sms_only_where_the_measured_clock_fell(base_mhz, said):
    shown = parse(VERDICT, conditions(synthetic(base_mhz))[0])
    assert shown[1:] == [said, approx(base_mhz), approx(1980.0)], shown
    assert shown[0].startswith("1.0 MB 1.50x"), f"cold 9 us over warm 6 us at L2/8 of a 4 MB L2: {shown[0]}"
