"""Section 5, a size sweep and normalize_against: verdicts and figures against the recorded rows, both backends."""

from pytest import approx

SWEEP = "at n={} float16 reached {} TFLOP/s, {}x float32's {}; at n={} float16 got {}% of that rate"
RATIO = (
    "normalize_against made float16's AvgValue {} (float16 took that share of float32's time), while its StdDev "
    "stayed {} {}"
)
PEAK_KEYS = {"float32": "fp32_tflops", "float16": "fp16_tflops"}


def rates(recorded) -> dict:
    """(precision, n) -> TFLOP/s as 2 n^3 FLOPs over the recorded kernel time (not nsight's derived metric)."""
    frame = recorded.bound(5)["sweep_frame"]
    times = frame[frame.Metric == "gpu__time_duration.sum"]
    assert set(times.Unit) == {"ns"}, f"sweep_frame's times are in {set(times.Unit)}"
    return {(r.Annotation, r.n): 2 * r.n**3 / (r.AvgValue * 1e-9) / 1e12 for r in times.itertuples()}


def test_section_5s_table_is_2_n_cubed_flops_over_each_precisions_time_at_each_size(recorded):
    mine = rates(recorded)
    assert len({n for _, n in mine}) >= 3 and {p for p, _ in mine} == set(PEAK_KEYS), f"the sweep changed: {mine}"
    recorded.section(5)
    table = recorded.value("tflops_table.to_dict()")  # {precision: {n: TFLOP/s}}
    shown = {(precision, int(n)): value for precision, column in table.items() for n, value in column.items()}
    assert shown == approx(mine, rel=0.01), "check matmul_tflops and the table's columns"


def test_section_5s_sweep_verdict_and_figures_are_the_largest_and_smallest_products_rates(recorded):
    mine = rates(recorded)
    smallest, largest = min(n for _, n in mine), max(n for _, n in mine)
    fp16, fp32 = mine["float16", largest], mine["float32", largest]
    n_top, top16, gap, top32, n_low, share = recorded.shown(5, SWEEP)
    assert (n_top, n_low) == (largest, smallest), "the verdict names the largest, then the smallest size"
    assert [top16, gap, top32] == approx([fp16, fp16 / fp32, fp32], rel=0.01, abs=0.06), "the largest size's rows"
    assert share == approx(100 * mine["float16", smallest] / fp16, abs=0.6), "float16's share at the smallest size"
    for precision, want in (("float32", fp32), ("float16", fp16)):
        recorded.check_figure(5, f"{precision} product, n={largest}", want, "TFLOP/s", PEAK_KEYS[precision], rel=0.01)
    assert 1 < mine["float16", smallest] / mine["float32", smallest] < fp16 / fp32, "the gap no longer widens (s5-read)"


def test_section_5s_ratio_verdict_is_float16s_normalized_mean_and_its_undivided_stddev(recorded):
    frame = recorded.bound(5)["ratio_frame"]
    rows = {row["Annotation"]: row for row in frame.to_dict("records")}
    fp16, fp32 = rows["float16"], rows["float32"]
    assert recorded.shown(5, RATIO) == [approx(fp16["AvgValue"], abs=6e-4), approx(fp16["StdDev"], abs=0.6), "ns"]
    mean_ns = {name: (row["CI95_Lower"] + row["CI95_Upper"]) / 2 for name, row in rows.items()}  # undivided
    assert fp16["Normalized"] == "float32" and fp32["AvgValue"] == approx(1), rows
    assert fp16["AvgValue"] == approx(mean_ns["float16"] / mean_ns["float32"], rel=1e-6), "only the mean is divided"
    half_width = 1.96 * fp16["StdDev"] / fp16["NumRuns"] ** 0.5
    assert (fp16["CI95_Upper"] - fp16["CI95_Lower"]) / 2 == approx(half_width, rel=1e-3), "StdDev stays in ns"
