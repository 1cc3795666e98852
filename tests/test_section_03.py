"""Section 3, how many runs: the spread of twenty runs, and the host clock and CUDA events against nsight's time,
each verdict against the recorded rows and timings it reads, on both backends."""

import re

import pytest

from plumbing.harness import lookup_peaks

SPREAD = re.compile(
    r"the 16K-element add \(([\d.]+) us\) varied by ([\d.]+)% over (\d+) runs \((stable|not stable)\), "
    r"the 16M add by ([\d.]+)%, the matmul by ([\d.]+)%$"
)
CLOCKS = re.compile(
    r"the host clock said (\d+) us and CUDA events (\d+) us for the matmul nsight timed at (\d+) us "
    r"\(([\d.]+)x and ([\d.]+)x\)$"
)
COLUMNS = ["Annotation", "Metric", "n", "AvgValue", "StdDev", "Unit", "NumRuns", "StableMeasurement"]


def spread_verdict(recorded) -> re.Match:
    found = [SPREAD.match(finding) for finding in recorded.verdicts(3)]
    assert any(found), f"section 3 printed no verdict on the spread of its runs (s3-verdict): {recorded.verdicts(3)}"
    return next(match for match in found if match)


def clocks_verdict(recorded) -> re.Match:
    found = [CLOCKS.match(finding) for finding in recorded.verdicts(3)]
    assert any(found), (
        f"section 3 printed no verdict on the host clock and events (s3-why-verdict): {recorded.verdicts(3)}"
    )
    return next(match for match in found if match)


def rows(recorded) -> dict:
    """(annotation, n) -> the recorded row of runs_frame, as s3-run bound it."""
    records = recorded.value(f"runs_frame[{COLUMNS!r}].to_dict('records')")
    assert {row["Metric"] for row in records} == {"gpu__time_duration.sum"} and {r["Unit"] for r in records} == {
        "ns"
    }, f"runs_frame holds other metrics or units than gpu__time_duration.sum in ns: {records}"
    return {(row["Annotation"], row["n"]): row for row in records}


def rsd_pct(row) -> float:
    return 100 * row["StdDev"] / row["AvgValue"]


def test_section_3_runs_on_each_recording_and_prints_both_verdicts(recorded):
    printed = recorded.section(3)
    gpu = recorded.recording["provenance"]["gpu"]
    assert printed.count(f"On this {gpu}: ") == 2, (
        f"section 3 must print two verdict lines on {recorded.folder.name} (s3-verdict and s3-why-verdict each call "
        f"verdict(3, ...)):\n{printed[-1500:]}"
    )
    spread_verdict(recorded)
    clocks_verdict(recorded)
    assert recorded.value("SECTIONS[3]['headline']") == "; ".join(recorded.verdicts(3)), (
        "section 3's headline is not its two printed findings joined by '; ': both verdict cells must call "
        "verdict(3, ...)"
    )


def test_section_3s_spread_verdict_names_each_rows_mean_and_relative_spread(recorded):
    shown, by_row = spread_verdict(recorded), rows(recorded)
    small, large = by_row[("u + v", 2**14)], by_row[("u + v", 2**24)]
    matmuls = [row for (annotation, _), row in by_row.items() if annotation == "m @ m"]
    assert len(matmuls) == 2 and all(row["NumRuns"] == 20 for row in by_row.values()), f"runs_frame changed: {by_row}"
    assert int(shown[3]) == small["NumRuns"], f"the verdict says {shown[3]} runs, the rows have {small['NumRuns']}"
    assert float(shown[1]) == pytest.approx(small["AvgValue"] / 1e3, abs=0.06), (
        f"the spread verdict's 16K add time {shown[1]} us is not the 16K-element row's AvgValue "
        f"{small['AvgValue'] / 1e3:.2f} us (ns -> us, and the 2**14 row)"
    )
    assert float(shown[2]) == pytest.approx(rsd_pct(small), abs=0.06), (
        f"the spread verdict's 16K spread {shown[2]}% is not the 16K add's StdDev / AvgValue = {rsd_pct(small):.2f}%"
    )
    assert float(shown[5]) == pytest.approx(rsd_pct(large), abs=0.06), (
        f"the spread verdict's 16M spread {shown[5]}% is not the 16M add's StdDev / AvgValue = {rsd_pct(large):.2f}%"
    )
    worst = max(rsd_pct(row) for row in matmuls)
    assert float(shown[6]) == pytest.approx(worst, abs=0.06), (
        f"the spread verdict's matmul spread {shown[6]}% is not the larger of the matmul rows' spreads ({worst:.2f}%)"
    )


def test_section_3_calls_the_small_add_stable_only_when_its_spread_is_under_2_percent(recorded):
    shown, small = spread_verdict(recorded), rows(recorded)[("u + v", 2**14)]
    expected = "stable" if rsd_pct(small) < 2 else "not stable"
    assert shown[4] == expected, (
        f"the spread verdict calls the 16K add {shown[4]!r}, but its runs spread by {rsd_pct(small):.2f}% (nsight's "
        f"StableMeasurement is under 2%): the word must follow the 16K row's StableMeasurement"
    )
    assert small["StableMeasurement"] is (rsd_pct(small) < 2), f"nsight's StableMeasurement is not RSD < 2%: {small}"


def test_section_3s_figure_is_the_16m_adds_three_float32_arrays_over_its_time(recorded):
    recorded.section(3)
    large = rows(recorded)[("u + v", 2**24)]
    gbs = 3 * 4 * 2**24 / (large["AvgValue"] * 1e-9) / 1e9  # x and y read, x + y written, 4 bytes each
    figure = recorded.figure(3)
    assert figure["name"] == "u + v, 16M elements" and figure["unit"] == "GB/s" and figure["peak_kind"] == "dram_gbs", (
        f"section 3's figure is {figure}: check_figure in s3-verdict must name the 16M add in GB/s against dram_gbs"
    )
    assert figure["value"] == pytest.approx(gbs, rel=1e-3), (
        f"section 3's figure {figure['value']} GB/s is not 3 x 4 x 2**24 bytes over the 16M row's "
        f"{large['AvgValue']} ns = {gbs:.1f} GB/s: check the byte count, the row and the ns factor in s3-verdict"
    )
    _, peaks = lookup_peaks(recorded.recording["provenance"]["gpu"])
    assert peaks and 5 < 100 * gbs / peaks["dram_gbs"] <= 100, f"a 16M add at {gbs:.0f} GB/s: outside 5-100% of peak"


def test_section_3s_runs_are_plausible_short_kernels_spread_more_and_the_matmul_fills_the_gpu(recorded):
    recorded.section(3)
    by_row = rows(recorded)
    small, large = by_row[("u + v", 2**14)], by_row[("u + v", 2**24)]
    assert small["AvgValue"] < large["AvgValue"] / 4, f"a 16K add is not far quicker than a 16M add: {small} {large}"
    assert rsd_pct(small) > rsd_pct(large), (
        f"the lesson says a few-microsecond kernel spreads more than a long one, but the 16K add spread "
        f"{rsd_pct(small):.2f}% and the 16M add {rsd_pct(large):.2f}%: re-record section 3, or revise s3-read"
    )
    _, peaks = lookup_peaks(recorded.recording["provenance"]["gpu"])
    for (annotation, n), row in by_row.items():
        if annotation == "m @ m":
            tflops = 2 * 2048**3 / (row["AvgValue"] * 1e-9) / 1e12
            assert 5 < 100 * tflops / peaks["fp32_tflops"] <= 100, f"m @ m (n={n}) at {tflops:.1f} TFLOP/s"


def test_section_3s_clock_verdict_is_the_mean_host_and_event_times_against_nsights_matmul(recorded):
    shown = clocks_verdict(recorded)
    host_us, events_us = recorded.value("[list(map(float, host_us)), list(map(float, events_us))]")
    assert len(host_us) == len(events_us) == 10, "s3-why-run must time the matmul ten times each way"
    matmuls = [row for (annotation, _), row in rows(recorded).items() if annotation == "m @ m"]
    host, events = sum(host_us) / 10, sum(events_us) / 10
    nsight_us = sum(row["AvgValue"] for row in matmuls) / len(matmuls) / 1e3
    for text, value, what in ((shown[1], host, "host clock"), (shown[2], events, "CUDA events")):
        assert float(text) == pytest.approx(value, abs=0.6), (
            f"the clock verdict's {what} time {text} us is not the mean of its ten timings, {value:.1f} us"
        )
    assert float(shown[3]) == pytest.approx(nsight_us, abs=0.6), (
        f"the clock verdict's nsight time {shown[3]} us is not the matmul rows' mean AvgValue {nsight_us:.1f} us "
        "(ns -> us)"
    )
    for text, value, what in ((shown[4], host / nsight_us, "host clock"), (shown[5], events / nsight_us, "events")):
        assert float(text) == pytest.approx(value, abs=0.006), (
            f"the clock verdict's {what} ratio {text}x is not {value:.3f} (its mean time over nsight's)"
        )


def test_section_3s_host_clock_and_events_time_more_than_the_kernel_itself(recorded):
    recorded.section(3)
    host_us, events_us = recorded.value("[list(map(float, host_us)), list(map(float, events_us))]")
    matmuls = [row for (annotation, _), row in rows(recorded).items() if annotation == "m @ m"]
    nsight_us = sum(row["AvgValue"] for row in matmuls) / len(matmuls) / 1e3
    host, events = sum(host_us) / len(host_us), sum(events_us) / len(events_us)
    assert 0.98 * nsight_us < events < 1.02 * host < 3 * nsight_us, (
        f"s3-why-read says the host clock adds launch and synchronisation and events add the launch to the "
        f"kernel's {nsight_us:.0f} us, but the host clock said {host:.0f} us and events {events:.0f} us: "
        "re-record section 3, or revise the lesson"
    )
