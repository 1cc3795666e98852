"""Section 2, one kernel, one row: its verdict against the recorded row it reads, on both backends."""

import re

import pytest

from plumbing.harness import lookup_peaks


def test_section_2_runs_on_each_recording_and_prints_its_verdict(recorded):
    printed = recorded.section(2)
    gpu = recorded.recording["provenance"]["gpu"]
    assert f"On this {gpu}: one 2048 x 2048 fp32 product took" in printed, (
        f"section 2 printed no verdict line on {recorded.folder.name}; its last cell must call verdict(2, ...):\n"
        f"{printed[-1500:]}"
    )


def test_section_2s_verdict_and_figure_are_the_rows_time_as_2_n_cubed_flops(recorded):
    recorded.section(2)
    row = recorded.value("first_frame.iloc[0][['AvgValue', 'Unit', 'NumRuns', 'n']].to_dict()")
    assert row["Unit"] == "ns" and row["n"] == 2048 and row["NumRuns"] == 1, f"the recorded row changed: {row}"
    tflops = 2 * 2048**3 / (row["AvgValue"] * 1e-9) / 1e12
    figure = recorded.figure(2)
    assert figure["name"] == "fp32 product, n=2048" and figure["value"] == pytest.approx(tflops, rel=1e-3), (
        f"section 2's figure is {figure}, but the recorded row's {row['AvgValue']} ns for 2 * 2048^3 FLOPs is "
        f"{tflops:.2f} TFLOP/s: check the FLOP count and the ns -> s factor in s2-verdict"
    )
    headline = recorded.value("SECTIONS[2]['headline']")
    shown = re.search(r"took ([\d,]+) us \(([\d.]+) TFLOP/s\)", headline)
    assert shown, f"section 2's verdict names no time and rate: {headline!r}"
    assert float(shown[1].replace(",", "")) == pytest.approx(row["AvgValue"] / 1e3, abs=0.6), (
        f"the verdict's time {shown[1]} us is not the row's AvgValue {row['AvgValue'] / 1e3:.1f} us"
    )
    assert float(shown[2]) == pytest.approx(tflops, abs=0.06), f"the verdict's rate is not {tflops:.1f}: {headline!r}"
    _, peaks = lookup_peaks(recorded.recording["provenance"]["gpu"])
    assert peaks and 5 < 100 * tflops / peaks["fp32_tflops"] <= 100, "an fp32 2048 product outside 5-100% of peak"
