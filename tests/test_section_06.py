"""Section 6, the roofline, against the recorded rows with FLOPs and bytes counted here from the lesson's shapes."""

import pytest
from pytest import approx
from support import TO_BASE, frame_rows, parse

TIME, SM = "gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
MATMUL, SCALE, SOFTMAX = "tensor-core product", "scaling 256 MiB", "row softmax"
# An fp16 4096 x 4096 product (two operands and the product, 2 bytes each; 2 n^3 FLOPs); x * 2.0 over 256 MiB of
# float32 (a multiply an element, 4 bytes read and 4 written); a softmax over the rows of an 8192 x 1024 float32
# matrix (5 FLOPs an element: max, subtract, exp, sum, divide; read once, written once).
SCALED = 256 * 2**20 // 4
SHAPES = {
    MATMUL: (2 * 4096**3, 3 * 4096 * 4096 * 2, "fp16_tflops"),
    SCALE: (SCALED, SCALED * 8, "fp32_tflops"),
    SOFTMAX: (5 * 8192 * 1024, 8192 * 1024 * 8, "fp32_tflops"),
}
HELD = 60  # % of its roof from which a kernel is held by it (the lesson's line)
VERDICT = "; ".join(["{}: {} at {}% of its roof"] * 3) + "; the larger of SM % and DRAM % disagrees for: {}"
FIX = "check section 6's table cell (TFLOP/s, FLOP/byte, % of roof, roofline says) and its WORK cell"


def roofline(seconds: dict, peaks: dict) -> dict:
    """{region: (TFLOP/s, FLOP/byte, % of roof, what the roofline says)} for these kernel times."""
    readings = {}
    for region, (flops, moved, peak_key) in SHAPES.items():
        tflops, intensity = flops / seconds[region] / 1e12, flops / moved
        pct = 100 * tflops / min(peaks[peak_key], intensity * peaks["dram_gbs"] / 1e3)
        side = "compute" if intensity >= peaks[peak_key] / (peaks["dram_gbs"] / 1e3) else "memory"
        readings[region] = (tflops, intensity, pct, side if pct >= HELD else "neither")
    return readings


def recomputed(recorded) -> tuple[dict, dict]:
    measured = frame_rows(recorded.bound(6)["bound_frame"], 3, 3)
    return measured, roofline({region: measured[region, TIME] for region in SHAPES}, recorded.peaks())


def test_section_6s_table_is_each_kernels_shape_counted_work_over_its_own_rows_time(recorded):
    measured, mine = recomputed(recorded)
    recorded.section(6)
    table = recorded.value("bound.drop(columns=BOUND_METRICS).to_dict(orient='index')")
    assert sorted(table) == sorted(SHAPES), f"the table's rows are {sorted(table)}, not the three regions"
    for region, (tflops, intensity, pct, says) in mine.items():
        row = table[region]
        assert [row["TFLOP/s"], row["FLOP/byte"], row["% of roof"]] == approx([tflops, intensity, pct], rel=1e-6), FIX
        quick = "compute" if measured[region, SM] > measured[region, DRAM] else "memory"
        assert (row["roofline says"], row["larger of SM %, DRAM %"]) == (says, quick), f"{region}: {FIX}"


def test_section_6s_verdict_names_each_kernels_reading_and_where_the_counters_disagree(recorded):
    measured, mine = recomputed(recorded)
    *readings, disagree = recorded.shown(6, VERDICT)
    assert readings[0::3] == list(SHAPES), f"the verdict reads the kernels {readings[0::3]}, not {list(SHAPES)}"
    for region, says, pct in zip(*[iter(readings)] * 3, strict=True):
        assert (says, pct) == (mine[region][3], approx(mine[region][2], abs=0.51)), f"{region}: {FIX}, then the verdict"
    quick = {r: "compute" if measured[r, SM] > measured[r, DRAM] else "memory" for r in SHAPES}
    expected = [region for region in SHAPES if quick[region] != mine[region][3]]
    assert disagree.split(", ") == (expected or ["none"]), f"the quick reading disagrees for {expected or 'none'}"


def test_section_6s_figure_is_x_times_2s_bandwidth_from_the_bytes_it_must_move(recorded):
    seconds = frame_rows(recorded.bound(6)["bound_frame"], 3, 3)[SCALE, TIME]
    gbs = SHAPES[SCALE][1] / seconds / 1e9
    recorded.check_figure(6, SCALE, gbs, "GB/s", "dram_gbs")


@pytest.mark.parametrize("below", [True, False], ids=["matmul-softmax-below-scale-above", "the-other-way"])
def test_section_6_says_neither_just_under_60_percent_of_the_roof_and_the_ridge_side_just_over(recorded, below):
    targets = {MATMUL: 57 if below else 63, SCALE: 63 if below else 57, SOFTMAX: 57 if below else 63}
    at_one_second = roofline(dict.fromkeys(SHAPES, 1.0), recorded.peaks())  # % of roof scales as 1 / time
    seconds = {region: at_one_second[region][2] / targets[region] for region in SHAPES}
    units = {r.Annotation: r.Unit for r in recorded.bound(6)["bound_frame"].itertuples() if r.Metric == TIME}
    change = "bound_frame = bound_frame.copy()\n" + "".join(
        f"bound_frame.loc[(bound_frame.Annotation == {region!r}) & (bound_frame.Metric == {TIME!r}), 'AvgValue'] = "
        f"{seconds[region] / TO_BASE[units[region]]!r}\n"
        for region in SHAPES
    )
    rerun = recorded.altered(6, change, "bound['roofline says'].to_dict()")
    readings = parse(VERDICT, rerun["findings"])[:-1]
    for region, (_, _, pct, says) in roofline(seconds, recorded.peaks()).items():
        assert rerun["read"][region] == says == readings[readings.index(region) + 1], (
            f"{region} at {pct:.0f}% of its roof: held by its roof from {HELD}%, on its ridge side; {FIX}"
        )
