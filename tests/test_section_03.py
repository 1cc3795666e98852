"""Section 3, how many runs: spread, host clock and CUDA events, against the recorded rows, on both backends."""

import pytest
from pytest import approx
from support import parse

SPREAD = "the 16K-element add ({} us) varied by {}% over {} runs ({}), the 16M add by {}%, the matmul by {}%"
CLOCKS = "the host clock said {} us and CUDA events {} us for the matmul nsight timed at {} us ({}x and {}x)"


def rows(recorded) -> dict:
    """(annotation, n) -> the row of runs_frame, with its spread recomputed from StdDev and AvgValue."""
    frame = recorded.bound(3)["runs_frame"]
    assert set(frame.Unit) == {"ns"} and set(frame.Metric) == {"gpu__time_duration.sum"}, "runs_frame changed"
    return {(r.Annotation, r.n): {**r._asdict(), "rsd": 100 * r.StdDev / r.AvgValue} for r in frame.itertuples()}


def test_section_3s_spread_verdict_names_each_rows_mean_spread_runs_and_stability(recorded):
    by_row = rows(recorded)
    small, large = by_row["u + v", 2**14], by_row["u + v", 2**24]
    matmul = max(row["rsd"] for (annotation, _), row in by_row.items() if annotation == "m @ m")
    us, rsd, runs, stable, large_rsd, matmul_rsd = recorded.shown(3, SPREAD)
    expected = [small["AvgValue"] / 1e3, small["rsd"], small["NumRuns"], large["rsd"], matmul]
    assert [us, rsd, runs, large_rsd, matmul_rsd] == approx(expected, abs=0.06), "check each row and factor read"
    assert stable == ("stable" if small["StableMeasurement"] else "not stable"), "the word follows StableMeasurement"
    assert bool(small["StableMeasurement"]) == (small["rsd"] < 2), "nsight's StableMeasurement is not RSD < 2%"


@pytest.mark.parametrize("stable", [True, False])
def test_section_3_calls_the_small_add_stable_exactly_when_nsight_found_it_stable(recorded, stable):
    findings = recorded.altered(3, f"runs_frame = runs_frame.assign(StableMeasurement={stable})")["findings"]
    assert parse(SPREAD, findings)[3] == ("stable" if stable else "not stable"), findings


def test_section_3s_figure_is_the_16m_adds_three_float32_arrays_over_its_time(recorded):
    large = rows(recorded)["u + v", 2**24]
    gbs = 3 * 4 * 2**24 / (large["AvgValue"] * 1e-9) / 1e9  # x and y read, x + y written
    recorded.check_figure(3, "u + v, 16M elements", gbs, "GB/s", "dram_gbs")


def test_section_3s_clock_verdict_is_the_mean_host_and_event_times_against_nsights_matmul(recorded):
    bound = recorded.bound(3)
    host, events = (sum(bound[name]) / len(bound[name]) for name in ("host_us", "events_us"))
    nsight = sum(r["AvgValue"] for (a, _), r in rows(recorded).items() if a == "m @ m") / 2 / 1e3
    shown = recorded.shown(3, CLOCKS)
    assert shown[:3] == approx([host, events, nsight], abs=0.6), "the timings' means and the matmul rows' (ns -> us)"
    assert shown[3:] == approx([host / nsight, events / nsight], abs=0.006), f"each time over nsight's: {shown}"
    assert 0.98 * nsight < events < 1.02 * host < 3 * nsight, "the recording no longer shows what section 3 says"
    small, large = rows(recorded)["u + v", 2**14], rows(recorded)["u + v", 2**24]
    assert small["rsd"] > large["rsd"], "the recording no longer shows a short kernel spreading more"
