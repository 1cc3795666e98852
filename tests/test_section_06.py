"""Section 6, the roofline: each kernel's verdict and the section's figure against the recorded rows it reads, with the
FLOPs and bytes counted here from the shapes the lesson names (never from the notebook's WORK)."""

import json
import re

import pytest
import recordings
from support import TO_BASE, frame_rows

from plumbing.harness import lookup_peaks

TIME, SM, DRAM = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
MATMUL, SCALE, SOFTMAX = "tensor-core product", "scaling 256 MiB", "row softmax"
# From the lesson text: an fp16 4096 x 4096 product (two operands, one product, 2 bytes each, 2 n^3 FLOPs);
# x * 2.0 over 256 MiB of float32 (one multiply per element; it reads 4 bytes and writes 4); a softmax over the rows
# of an 8192 x 1024 float32 matrix (max, subtract, exp, sum, divide: 5 FLOPs an element; read once, written once).
SCALED = 256 * 2**20 // 4
SHAPES = {
    MATMUL: (2 * 4096**3, 3 * 4096 * 4096 * 2, "fp16_tflops"),
    SCALE: (SCALED, SCALED * (4 + 4), "fp32_tflops"),
    SOFTMAX: (5 * 8192 * 1024, 8192 * 1024 * (4 + 4), "fp32_tflops"),
}
HELD = 60  # % of its roof from which a kernel is held by it (Nsight Compute's rules' line, the lesson says)
READING = re.compile(
    r"(tensor-core product|scaling 256 MiB|row softmax): (memory|compute|neither) at (\d+)% of its roof"
)
WHERE_TO_FIX = "the table cell of section 6 (bound: TFLOP/s, FLOP/byte, % of roof, roofline says) or its WORK cell"


def rows(recorded) -> dict:
    return frame_rows(recorded, "bound_frame", 3, 3)


def roofline(seconds: dict, peaks: dict) -> dict:
    """{region: (TFLOP/s, FLOP/byte, % of roof, what the roofline says)} for the given kernel times."""
    readings = {}
    for region, (flops, moved, peak_key) in SHAPES.items():
        tflops, intensity = flops / seconds[region] / 1e12, flops / moved
        roof = min(peaks[peak_key], intensity * peaks["dram_gbs"] / 1e3)
        side = "compute" if intensity >= peaks[peak_key] / (peaks["dram_gbs"] / 1e3) else "memory"
        pct = 100 * tflops / roof
        readings[region] = (tflops, intensity, pct, side if pct >= HELD else "neither")
    return readings


def peaks_of(recorded) -> dict:
    _, peaks = lookup_peaks(recorded.recording["provenance"]["gpu"])
    assert peaks, f"{recorded.recording['provenance']['gpu']} has no datasheet peaks in the harness's GPU_PEAKS"
    return peaks


def recomputed(recorded) -> dict:
    recorded.section(6)
    measured = rows(recorded)
    return roofline({region: measured[region, TIME] for region in SHAPES}, peaks_of(recorded))


def shown_readings(headline: str) -> dict:
    found = READING.findall(headline)
    assert sorted(region for region, _, _ in found) == sorted(SHAPES), (
        f"section 6's verdict must name each of the three kernels' readings once: {headline!r}"
    )
    return {region: (says, int(pct)) for region, says, pct in found}


def test_section_6_runs_on_each_recording_and_prints_its_verdict(ncu_recorded):
    printed = ncu_recorded.section(6)
    gpu = ncu_recorded.recording["provenance"]["gpu"]
    assert f"On this {gpu}: tensor-core product: " in printed, (
        f"section 6 printed no verdict line on {ncu_recorded.folder.name}; its last cell must call verdict(6, ...):\n"
        f"{printed[-1500:]}"
    )


def test_section_6s_table_is_each_kernels_shape_counted_flops_and_bytes_over_its_own_rows_time(ncu_recorded):
    mine = recomputed(ncu_recorded)
    table = ncu_recorded.value("bound[['TFLOP/s', 'FLOP/byte', '% of roof', 'roofline says']].to_dict(orient='index')")
    assert sorted(table) == sorted(SHAPES), f"the table's rows are {sorted(table)}, not the three regions"
    for region, (tflops, intensity, pct, says) in mine.items():
        row = table[region]
        assert row["TFLOP/s"] == pytest.approx(tflops, rel=1e-6), (
            f"{region}: the table's {row['TFLOP/s']:.3f} TFLOP/s is not its FLOPs over its own row's time "
            f"({tflops:.3f}): check the FLOP count and the time's row and unit in {WHERE_TO_FIX}"
        )
        assert row["FLOP/byte"] == pytest.approx(intensity, rel=1e-6), (
            f"{region}: FLOP/byte {row['FLOP/byte']:.3f} is not {intensity:.3f} (FLOPs over the bytes it must move "
            f"from its shape): check {WHERE_TO_FIX}"
        )
        assert row["% of roof"] == pytest.approx(pct, rel=1e-6), (
            f"{region}: {row['% of roof']:.2f}% of roof, not {pct:.2f}% (roof = min(compute peak, FLOP/byte x DRAM "
            f"bandwidth)): check {WHERE_TO_FIX}"
        )
        assert row["roofline says"] == says, (
            f"{region} at {pct:.1f}% of its roof: the table says {row['roofline says']!r}, the roofline {says!r} "
            f"('neither' under {HELD}%, else the side of the ridge): check {WHERE_TO_FIX}"
        )


def test_section_6s_verdict_names_each_kernels_roofline_reading_and_percent_of_roof(ncu_recorded):
    mine = recomputed(ncu_recorded)
    shown = shown_readings(ncu_recorded.value("SECTIONS[6]['headline']"))
    for region, (_, _, pct, says) in mine.items():
        assert shown[region][0] == says, (
            f"section 6's verdict says {region} is {shown[region][0]!r}; at {pct:.1f}% of its roof the roofline says "
            f"{says!r}: fix the readings in s6-verdict (or {WHERE_TO_FIX})"
        )
        assert shown[region][1] == pytest.approx(pct, abs=0.51), (
            f"section 6's verdict puts {region} at {shown[region][1]}% of its roof; its row gives {pct:.1f}%"
        )


def test_section_6s_verdict_lists_the_kernels_where_the_larger_counter_disagrees_with_the_roofline(ncu_recorded):
    mine, measured = recomputed(ncu_recorded), rows(ncu_recorded)
    quick = {region: "compute" if measured[region, SM] > measured[region, DRAM] else "memory" for region in SHAPES}
    table = ncu_recorded.value("bound['larger of SM %, DRAM %'].to_dict()")
    assert table == quick, (
        f"the table's 'larger of SM %, DRAM %' column is {table}, but the rows' SM % and DRAM % give {quick}: "
        "check which counter maps to compute and which to memory in the table cell of section 6"
    )
    disagree = [region for region in SHAPES if quick[region] != mine[region][3]]
    headline = ncu_recorded.value("SECTIONS[6]['headline']")
    shown = re.search(r"the larger of SM % and DRAM % disagrees for: (.+)$", headline)
    assert shown, f"section 6's verdict does not say where the quick reading disagrees: {headline!r}"
    assert sorted(shown[1].split(", ")) == sorted(disagree or ["none"]), (
        f"section 6's verdict says the quick reading disagrees for {shown[1]!r}; the rows give "
        f"{disagree or 'none'} (quick {quick}, roofline { {k: v[3] for k, v in mine.items()} }): fix s6-verdict"
    )


def test_section_6s_figure_is_x_times_2s_bandwidth_from_the_bytes_it_must_move(ncu_recorded):
    ncu_recorded.section(6)
    seconds = rows(ncu_recorded)[SCALE, TIME]
    gbs = SHAPES[SCALE][1] / seconds / 1e9
    figure = ncu_recorded.figure(6)
    assert (figure["name"], figure["unit"], figure["peak_kind"]) == ("scaling 256 MiB", "GB/s", "dram_gbs"), (
        f"section 6's figure should be the {SCALE!r} row's bandwidth in GB/s against the DRAM peak: {figure}"
    )
    assert figure["value"] == pytest.approx(gbs, rel=1e-3), (
        f"section 6's figure is {figure['value']} GB/s, but x * 2 reading and writing 4 bytes for each of its "
        f"{SCALED} floats in {seconds * 1e6:.1f} us is {gbs:.1f} GB/s: check the bytes and the s -> GB/s factor "
        "in s6-verdict's check_figure (and the x * 2 row of WORK)"
    )
    assert f"scaling 256 MiB: {figure['value']:,.1f} GB/s" in ncu_recorded.section(6), (
        "section 6 did not print its figure"
    )
    peaks = peaks_of(ncu_recorded)
    assert 5 < 100 * gbs / peaks["dram_gbs"] <= 100, f"x * 2 at {gbs:.0f} GB/s: outside 5-100% of the DRAM peak"


def test_section_6s_kernels_sit_under_their_roofs_and_counters_are_percentages(ncu_recorded):
    mine, measured, peaks = recomputed(ncu_recorded), rows(ncu_recorded), peaks_of(ncu_recorded)
    for region, (_, _, pct, _) in mine.items():
        assert 0 < pct <= 100, f"{region} at {pct:.1f}% of its roof: a roof is an upper bound; a count or unit slipped"
        assert 0 <= measured[region, SM] <= 100.5 and 0 <= measured[region, DRAM] <= 100.5, (
            f"{region}: SM % {measured[region, SM]} or DRAM % {measured[region, DRAM]} is not a percentage"
        )
    matmul = mine[MATMUL][0]
    assert 5 < 100 * matmul / peaks["fp16_tflops"] <= 100, f"an fp16 4096 product at {matmul:.0f} TFLOP/s"
    softmax_gbs = SHAPES[SOFTMAX][1] / measured[SOFTMAX, TIME] / 1e9
    assert 5 < 100 * softmax_gbs / peaks["dram_gbs"] <= 100, f"the softmax moving its matrix at {softmax_gbs:.0f} GB/s"


def rerun_on_times(recorded, seconds: dict) -> dict:
    """Section 6's own open and analysis cells on the recorded frame with these kernel times (seconds); what the
    table and the verdict then say. The kernel's SECTIONS and FIGURES are put back afterwards."""
    recorded.section(6)
    units = {r["Annotation"]: r["Unit"] for r in recorded.value("bound_frame.to_dict(orient='records')")
             if r["Metric"] == TIME}  # fmt: skip
    times = {region: seconds[region] / TO_BASE[units[region]] for region in seconds}
    sources = [source for _, role, source in recordings.cpu_section_sources(recorded.cells, 6)
               if role == "analysis"]  # fmt: skip
    recorded.session.run(f"""
import copy as _copy, json as _json
_saved = _copy.deepcopy(SECTIONS), _copy.deepcopy(FIGURES)
try:
    _scratch = dict(globals())
    _frame = bound_frame.copy()
    for _region, _value in _json.loads({json.dumps(json.dumps(times))}).items():
        _frame.loc[(_frame.Annotation == _region) & (_frame.Metric == {TIME!r}), "AvgValue"] = _value
    _scratch["bound_frame"] = _frame
    for _source in _json.loads({json.dumps(json.dumps(sources))}):
        exec(_source, _scratch)
    _rerun = {{"headline": SECTIONS[6]["findings"][-1], "says": _scratch["bound"]["roofline says"].to_dict()}}
finally:
    SECTIONS.clear()
    SECTIONS.update(_saved[0])
    FIGURES[:] = _saved[1]
""")
    return recorded.value("_rerun")


@pytest.mark.parametrize("below", [True, False], ids=["matmul-softmax-below-scale-above", "the-other-way"])
def test_section_6_says_neither_just_under_60_percent_of_the_roof_and_the_ridge_side_just_over(ncu_recorded, below):
    peaks = peaks_of(ncu_recorded)
    targets = {MATMUL: 57 if below else 63, SCALE: 63 if below else 57, SOFTMAX: 57 if below else 63}
    at_100 = roofline(dict.fromkeys(SHAPES, 1.0), peaks)  # at 1 s, % of roof scales as 1 / time
    seconds = {region: at_100[region][2] / targets[region] for region in SHAPES}
    expected = roofline(seconds, peaks)
    rerun = rerun_on_times(ncu_recorded, seconds)
    shown = shown_readings(rerun["headline"])
    for region, (_, _, pct, says) in expected.items():
        assert pct == pytest.approx(targets[region]), f"this test's own times put {region} at {pct}%"
        assert rerun["says"][region] == says and shown[region][0] == says, (
            f"with {region} at {pct:.0f}% of its roof, section 6 says {rerun['says'][region]!r} in its table and "
            f"{shown[region][0]!r} in its verdict, not {says!r}: a kernel is held by its roof from {HELD}% (check "
            f"the line and the ridge side in {WHERE_TO_FIX})"
        )
