"""Section 5, rates across sizes: the derived TFLOP/s and normalize_against's ratio, against the raw recorded runs."""

import re
from statistics import mean, stdev

import cupti_evidence
import pandas as pd
import pytest
from pytest import approx
from recordings import cell_source, decode, load_cells

VERDICT = re.compile(r"float16's lead (grew|did not grow) with size: (.+)$")
ONE_SIZE = re.compile(r"([\d.]+)x at n=(\d+)")


def raw_rates(recorded) -> dict:
    """(precision, n) -> each run's 2 n^3 FLOPs over its kernel time (ns), from the calls' raw per-run rows."""
    calls = [call for call in recorded.recording["calls"] if call["section"] == 5]
    rates = {}
    for raw in (decode(call["raw_frame"]) for call in calls):
        times = raw[raw.Metric == "gpu__time_duration.sum"]
        assert set(times.Unit) == {"ns"}, f"the raw times are in {set(times.Unit)}"
        for (precision, n), runs in times.groupby(["Annotation", "n"]):
            rates[precision, n] = [2 * n**3 / (t * 1e-9) / 1e12 for t in runs.Value]
    assert {n for _, n in rates} == {512, 2048, 8192} and len(calls) == 3, "one call per size, three sizes"
    return rates


def test_section_5s_table_is_float16s_normalized_row_a_ratio_beside_raw_tflops_spread_and_unit(recorded):
    rates = raw_rates(recorded)
    recorded.section(5)
    shown = cell_source(load_cells(), "s5-table").strip().splitlines()[-1]  # the table the cell displays
    table = recorded.value(f"({shown}).reset_index().to_dict('records')")
    assert [row["n"] for row in table] == [512, 2048, 8192], "one row a size"
    assert list(table[0]) == ["n", "AvgValue", "NormalizationValue", "StdDev", "Unit"], "the normalized row's columns"
    for row in table:
        fp32, fp16 = mean(rates["float32", row["n"]]), mean(rates["float16", row["n"]])
        shown = [row["AvgValue"], row["NormalizationValue"], row["StdDev"]]
        expected = [fp16 / fp32, fp32, stdev(rates["float16", row["n"]])]
        assert shown == approx(expected, abs=0.0051), f"n={row['n']}: ratio of mean rates, float32's rate, raw spread"
        assert row["Unit"] == "TFLOP/s", "the row keeps its raw unit"


def test_section_5s_verdict_gives_float16s_speed_up_at_every_size_and_whether_it_grew(recorded):
    rates = raw_rates(recorded)
    speedup = {n: mean(rates["float16", n]) / mean(rates["float32", n]) for n in (512, 2048, 8192)}
    (match,) = [m for m in map(VERDICT.match, recorded.findings(5)) if m]
    shown = {int(n): float(ratio) for ratio, n in ONE_SIZE.findall(match.group(2))}
    assert shown == approx(speedup, abs=0.06), "float16's mean rate over float32's, per size"
    grew = list(speedup.values()) == sorted(speedup.values())
    assert match.group(1) == ("grew" if grew else "did not grow"), f"{match.group(1)} for {speedup}"
    assert grew, "the recording no longer shows float16's lead growing with size (s5-read explains why)"


@pytest.mark.parametrize("monotonic", [True, False])
def test_section_5_says_the_lead_grew_only_when_it_grew_at_every_step(recorded, monotonic):
    change = (
        ""
        if monotonic
        else (
            "sweep_frame = sweep_frame.copy()\n"
            "_at = (sweep_frame.Metric == 'matmul_tflops') & (sweep_frame.Annotation == 'float16')\n"
            "_at &= sweep_frame.n == 2048\n"
            "sweep_frame.loc[_at, 'AvgValue'] = 1e3"
        )
    )
    (match,) = [m for m in map(VERDICT.match, recorded.altered(5, change)["findings"]) if m]
    assert match.group(1) == ("grew" if monotonic else "did not grow"), match.group(0)


def test_section_5s_normalized_rows_divide_only_the_mean_and_keep_the_raw_spread_and_unit(recorded):
    rates, frame = raw_rates(recorded), recorded.bound(5)["sweep_frame"]
    for row in frame[frame.Metric == "matmul_tflops"].itertuples():
        own, base = rates[row.Annotation, row.n], rates["float32", row.n]
        assert row.NormalizationValue == approx(mean(base)) and row.AvgValue == approx(mean(own) / mean(base))
        assert row.StdDev == approx(stdev(own)) and row.Unit == "TFLOP/s", "StdDev stays in raw TFLOP/s (s5-read)"


def test_on_the_cupti_run_section_5s_table_and_verdict_follow_the_raw_runs_of_each_size():
    frames, raws = (cupti_evidence.written("s5_sweep", kind) for kind in ("processed_data", "profiled_data"))
    said, _ = cupti_evidence.findings(5, {"sweep_frame": pd.concat(frames)})
    times = pd.concat(raws).query("Metric == 'gpu__time_duration.sum'")
    rate = times.assign(rate=2 * times.n**3 / times.Value / 1e3).groupby(["Annotation", "n"]).rate.mean()
    speedup = (rate["float16"] / rate["float32"]).to_dict()
    (match,) = [m for m in map(VERDICT.match, said) if m]
    shown = {int(n): float(ratio) for ratio, n in ONE_SIZE.findall(match.group(2))}
    assert shown == approx(speedup, abs=0.06), f"float16's mean rate over float32's from the raw runs: {speedup}"
    grew = list(speedup.values()) == sorted(speedup.values())
    assert match.group(1) == ("grew" if grew else "did not grow"), said
