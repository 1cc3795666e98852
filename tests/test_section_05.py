"""Section 5, a size sweep and a derived metric: the sweep's TFLOP/s and normalize_against, each verdict against the
recorded rows it reads, on both backends."""

import re

import pytest

from plumbing.harness import lookup_peaks

SWEEP = re.compile(
    r"at n=(\d+) float16 reached ([\d.]+) TFLOP/s, ([\d.]+)x float32's ([\d.]+); "
    r"at n=(\d+) float16 got (\d+)% of that rate$"
)
RATIO = re.compile(
    r"normalize_against made float16's AvgValue ([\d.]+) \(float16 took that share of float32's time\), while its "
    r"StdDev stayed ([\d,]+) (\S+)$"
)
TIME = "gpu__time_duration.sum"
PEAK_KEYS = {"float32": "fp32_tflops", "float16": "fp16_tflops"}


def shown(recorded, pattern: re.Pattern, what: str) -> re.Match:
    found = [match for match in map(pattern.match, recorded.verdicts(5)) if match]
    assert len(found) == 1, (
        f"section 5 printed no verdict of the form {pattern.pattern!r} ({what}): {recorded.verdicts(5)}"
    )
    return found[0]


def tflops_from_times(recorded) -> dict:
    """(annotation, n) -> TFLOP/s as 2 n^3 FLOPs over the recorded kernel time of sweep_frame (not nsight's metric)."""
    records = recorded.value(
        f"sweep_frame[sweep_frame.Metric == {TIME!r}][['Annotation', 'n', 'AvgValue', 'Unit']].to_dict('records')"
    )
    assert {row["Unit"] for row in records} == {"ns"}, f"sweep_frame's times are not in ns: {records}"
    return {(row["Annotation"], row["n"]): 2 * row["n"] ** 3 / (row["AvgValue"] * 1e-9) / 1e12 for row in records}


def fp16_ratio_row(recorded) -> dict:
    columns = ["Annotation", "Metric", "n", "AvgValue", "StdDev", "MinValue", "MaxValue", "NumRuns", "Unit"]
    columns += ["CI95_Lower", "CI95_Upper", "Normalized", "NormalizationValue"]
    records = recorded.value(f"ratio_frame[{columns!r}].to_dict('records')")
    assert {row["Annotation"] for row in records} == {"float32", "float16"}, f"ratio_frame changed: {records}"
    return {row["Annotation"]: row for row in records}


def test_section_5_runs_on_each_recording_and_prints_both_verdicts(recorded):
    printed = recorded.section(5)
    gpu = recorded.recording["provenance"]["gpu"]
    assert printed.count(f"On this {gpu}: ") == 2, (
        f"section 5 must print two verdict lines on {recorded.folder.name} (s5-verdict and s5-ratio-verdict each "
        f"call verdict(5, ...)):\n{printed[-1500:]}"
    )
    shown(recorded, SWEEP, "the sweep verdict")
    shown(recorded, RATIO, "the ratio verdict")
    assert recorded.value("SECTIONS[5]['headline']") == "; ".join(recorded.verdicts(5)), (
        "section 5's headline is not its two printed findings joined by '; ': both cells must call verdict(5, ...)"
    )


def test_section_5s_sweep_has_both_precisions_at_every_size_and_its_rate_is_2_n_cubed_over_the_time(recorded):
    recorded.section(5)
    rates = tflops_from_times(recorded)
    derived = recorded.value(
        "sweep_frame[sweep_frame.Metric == 'matmul_tflops'][['Annotation', 'n', 'AvgValue', 'Unit']].to_dict('records')"
    )
    sizes = sorted({n for _, n in rates})
    assert len(sizes) >= 3 and set(rates) == {(p, n) for p in PEAK_KEYS for n in sizes}, f"the sweep changed: {rates}"
    assert {row["Unit"] for row in derived} == {"TFLOP/s"}, f"matmul_tflops returns another unit: {derived}"
    times = recorded.value(
        "[[a, int(n), float(t), matmul_tflops(float(t), int(n))] for a, n, t in "
        f"sweep_frame.loc[sweep_frame.Metric == {TIME!r}, ['Annotation', 'n', 'AvgValue']].itertuples(index=False)]"
    )
    for annotation, n, time_ns, (value, unit) in times:
        assert unit == "TFLOP/s" and value == pytest.approx(rates[annotation, n], rel=1e-9), (
            f"the notebook's matmul_tflops({time_ns}, {n}) is {value} {unit}, but 2 n^3 FLOPs in {time_ns} ns is "
            f"{rates[annotation, n]:.3f} TFLOP/s: check the FLOP count and the ns factor in s5-define"
        )
    for row in derived:
        want = rates[row["Annotation"], row["n"]]
        assert row["AvgValue"] == pytest.approx(want, rel=0.01), (
            f"nsight's matmul_tflops for {row['Annotation']} at n={row['n']} is {row['AvgValue']:.2f}, but 2 n^3 FLOPs "
            f"over the row's time is {want:.2f} TFLOP/s: check the FLOP count and the ns factor in s5-define"
        )


def test_section_5s_sweep_verdict_and_figures_are_the_largest_products_rates(recorded):
    match, rates = shown(recorded, SWEEP, "the sweep verdict"), tflops_from_times(recorded)
    largest, smallest = max(n for _, n in rates), min(n for _, n in rates)
    fp16, fp32 = rates["float16", largest], rates["float32", largest]
    assert (int(match[1]), int(match[5])) == (largest, smallest), (
        f"the sweep verdict names n={match[1]} and n={match[5]}, but the sweep ran from n={smallest} to n={largest}"
    )
    for text, want, what in ((match[2], fp16, "float16"), (match[4], fp32, "float32")):
        assert float(text) == pytest.approx(want, rel=0.01, abs=0.06), (
            f"the sweep verdict's {what} rate at n={largest} is {text} TFLOP/s, but its recorded time gives {want:.1f}"
        )
    assert float(match[3]) == pytest.approx(fp16 / fp32, rel=0.01, abs=0.06), (
        f"the sweep verdict's float16 / float32 ratio {match[3]}x is not {fp16 / fp32:.2f} (float16's rate / float32's)"
    )
    share = 100 * rates["float16", smallest] / fp16
    assert int(match[6]) == pytest.approx(share, abs=0.6), (
        f"the sweep verdict says float16 got {match[6]}% at n={smallest}, but its rate is {share:.1f}% of n={largest}'s"
    )
    figures = {figure["name"]: figure for figure in recorded.value("FIGURES") if figure["section"] == 5}
    for precision, want in (("float32", fp32), ("float16", fp16)):
        figure = figures.get(f"{precision} product, n={largest}")
        assert figure, f"the sweep verdict recorded no figure '{precision} product, n={largest}': {sorted(figures)}"
        assert figure["unit"] == "TFLOP/s" and figure["peak_kind"] == PEAK_KEYS[precision], (
            f"the {precision} figure is checked against {figure['peak_kind']} in {figure['unit']}, not "
            f"{PEAK_KEYS[precision]} in TFLOP/s (s5-verdict)"
        )
        assert figure["value"] == pytest.approx(want, rel=0.01), (
            f"the {precision} figure is {figure['value']}, but n={largest}'s recorded time gives {want:.2f} TFLOP/s"
        )


def test_section_5s_rates_are_plausible_and_float16_pulls_away_with_size(recorded):
    recorded.section(5)
    rates = tflops_from_times(recorded)
    largest, smallest = max(n for _, n in rates), min(n for _, n in rates)
    _, peaks = lookup_peaks(recorded.recording["provenance"]["gpu"])
    for precision, key in PEAK_KEYS.items():
        pct = 100 * rates[precision, largest] / peaks[key]
        assert 5 < pct <= 100, (
            f"{precision} at n={largest}: {rates[precision, largest]:.1f} TFLOP/s = {pct:.1f}% of peak"
        )
        assert rates[precision, smallest] < rates[precision, largest], f"{precision}'s rate fell with size: {rates}"
    small_gap = rates["float16", smallest] / rates["float32", smallest]
    large_gap = rates["float16", largest] / rates["float32", largest]
    assert 1 < small_gap < large_gap, (
        f"s5-read says tensor cores widen the float16 / float32 gap as the matrix grows, but it is {small_gap:.1f}x "
        f"at n={smallest} and {large_gap:.1f}x at n={largest}: re-record section 5, or revise the lesson"
    )


def test_section_5s_ratio_verdict_names_float16s_ratio_and_its_stddev_in_its_unit(recorded):
    match, row = shown(recorded, RATIO, "the ratio verdict"), fp16_ratio_row(recorded)["float16"]
    assert float(match[1]) == pytest.approx(row["AvgValue"], abs=6e-4), (
        f"the ratio verdict's AvgValue {match[1]} is not the float16 row's {row['AvgValue']:.4f} of ratio_frame"
    )
    assert float(match[2].replace(",", "")) == pytest.approx(row["StdDev"], abs=0.6), (
        f"the ratio verdict's StdDev {match[2]} is not the float16 row's {row['StdDev']:.1f}"
    )
    assert match[3] == row["Unit"] == "ns", (
        f"the ratio verdict gives the StdDev in {match[3]!r}, the row in {row['Unit']}"
    )


def test_normalize_against_divides_only_the_mean_by_float32s(recorded):
    recorded.section(5)
    rows = fp16_ratio_row(recorded)
    fp16, fp32 = rows["float16"], rows["float32"]
    mean_ns = {name: (row["CI95_Lower"] + row["CI95_Upper"]) / 2 for name, row in rows.items()}  # undivided
    assert fp16["Normalized"] == fp32["Normalized"] == "float32" and fp32["AvgValue"] == pytest.approx(1), rows
    assert fp16["NormalizationValue"] == pytest.approx(mean_ns["float32"], rel=1e-6), (
        f"NormalizationValue {fp16['NormalizationValue']} is not float32's mean time {mean_ns['float32']:.1f} ns"
    )
    assert fp16["AvgValue"] == pytest.approx(mean_ns["float16"] / mean_ns["float32"], rel=1e-6), (
        f"float16's AvgValue {fp16['AvgValue']} is not its mean time over float32's "
        f"({mean_ns['float16']:.0f} / {mean_ns['float32']:.0f} ns)"
    )
    half_width = 1.96 * fp16["StdDev"] / fp16["NumRuns"] ** 0.5
    assert (fp16["CI95_Upper"] - fp16["CI95_Lower"]) / 2 == pytest.approx(half_width, rel=1e-3), (
        f"float16's StdDev {fp16['StdDev']} is not the spread of its interval in ns: normalize_against divided it?"
    )
    assert fp16["MinValue"] <= mean_ns["float16"] <= fp16["MaxValue"] and fp16["StdDev"] < 0.1 * mean_ns["float16"], (
        f"float16's MinValue, MaxValue and StdDev are not times in ns around {mean_ns['float16']:.0f}: {fp16}"
    )
    sweep = tflops_from_times(recorded)
    n = fp16["n"]
    assert fp16["AvgValue"] == pytest.approx(sweep["float32", n] / sweep["float16", n], rel=0.2), (
        f"float16's ratio {fp16['AvgValue']:.3f} at n={n} is far from the sweep's time ratio there"
    )
