"""Section 4, cache and clock control: cold against warm L2 and base against boost clock, its verdict against the
recorded rows of each condition it reads, on the Nsight Compute recordings."""

import re

import pytest

from plumbing.harness import TO_BASE_UNITS, lookup_peaks

VERDICT = re.compile(
    r"(a warm L2 sped up the smallest input|no input ran measurably faster warm) \(cold / warm time: (.+)\); "
    r"base clock held the SMs at ([\d,]+) MHz against ([\d,]+), and the large input took ([\d.]+)x as long$"
)
GAIN = re.compile(r"([\d.]+) MB ([\d.]+)x")
TIME, SM_CLOCK, DRAM_READ = "gpu__time_duration.sum", "gpc__cycles_elapsed.avg.per_second", "dram__bytes_read.sum"


def shown(recorded) -> re.Match:
    findings = recorded.verdicts(4)
    match = VERDICT.match(findings[0]) if len(findings) == 1 else None
    assert match, f"section 4 must print one verdict of the form {VERDICT.pattern!r} (s4-verdict): {findings}"
    return match


def measured(recorded) -> dict:
    """condition -> {(metric, n): AvgValue in seconds, bytes, Hz or %}, from the frames s4-run bound."""
    frames = recorded.value(
        "{name: frame[['Annotation', 'Metric', 'n', 'AvgValue', 'Unit', 'NumRuns']].to_dict('records') "
        "for name, frame in condition_frames.items()}"
    )
    assert set(frames) == {"cold", "warm", "base clock"}, f"condition_frames holds {sorted(frames)}"
    for name, records in frames.items():
        assert len({row["Annotation"] for row in records}) == 1 and {row["NumRuns"] for row in records} == {10}, (
            f"the {name!r} frame is not one region measured 10 times: {records}"
        )
    return {
        name: {(row["Metric"], row["n"]): row["AvgValue"] * TO_BASE_UNITS[row["Unit"]] for row in records}
        for name, records in frames.items()
    }


def sizes(recorded) -> tuple[int, int, int]:
    """An eighth and a quarter of L2, in float32 elements, from section 1's L2 size; and the large input the cold call
    measured (sixteen times L2, as the lesson says)."""
    l2_bytes = recorded.value("L2_BYTES")
    assert l2_bytes == recorded.recording["environment"]["l2_bytes"], "L2_BYTES is not the recorded L2 size"
    large = max(n for _, n in measured(recorded)["cold"])
    return l2_bytes // 8 // 4, l2_bytes // 4 // 4, large


def test_section_4_runs_on_each_recording_and_prints_its_verdict(ncu_recorded):
    printed = ncu_recorded.section(4)
    gpu = ncu_recorded.recording["provenance"]["gpu"]
    assert f"On this {gpu}: " in printed, (
        f"section 4 printed no verdict line on {ncu_recorded.folder.name}; s4-verdict must call verdict(4, ...):\n"
        f"{printed[-1500:]}"
    )
    shown(ncu_recorded)


def test_section_4s_conditions_were_measured_at_the_sizes_the_lesson_names(ncu_recorded):
    ncu_recorded.section(4)
    eighth, quarter, large = sizes(ncu_recorded)
    runs, l2_bytes = measured(ncu_recorded), ncu_recorded.value("L2_BYTES")
    for name in ("cold", "warm"):
        assert sorted({n for _, n in runs[name]}) == [eighth, quarter, large], (
            f"the {name!r} call of s4-sizes must run an eighth and a quarter of L2 ({[eighth, quarter]} floats) and "
            f"the large input, not {sorted({n for _, n in runs[name]})}"
        )
        assert {metric for metric, _ in runs[name]} >= {TIME, SM_CLOCK, DRAM_READ}, f"{name!r} lacks a metric"
    assert 4 * large >= 2 * l2_bytes, f"the large input ({4 * large} bytes) is not well above L2 ({l2_bytes} bytes)"
    assert {(TIME, large), (SM_CLOCK, large)} <= set(runs["base clock"]), (
        f"the base-clock call has no time and SM clock at the large input ({large} floats): {runs['base clock']}"
    )


def test_section_4s_large_input_is_sixteen_times_the_l2_size_in_bytes_as_the_lesson_says(ncu_recorded):
    ncu_recorded.section(4)
    large, l2_bytes = sizes(ncu_recorded)[2], ncu_recorded.value("L2_BYTES")
    assert 4 * large == 16 * l2_bytes, (
        f"the large input is {4 * large / 1e6:.1f} MB = {4 * large / l2_bytes:g} times the {l2_bytes / 1e6:.1f} MB "
        "L2, not sixteen times it as section 4's text says: SIXTEEN_TIMES in s4-sizes counts float32 elements"
    )


def test_section_4s_verdict_gives_cold_over_warm_time_at_each_input_size_in_mb(ncu_recorded):
    text, runs = shown(ncu_recorded)[2], measured(ncu_recorded)
    gains = [(float(mb), float(gain)) for mb, gain in GAIN.findall(text)]
    assert ", ".join(f"{mb} MB {gain}x" for mb, gain in GAIN.findall(text)) == text, f"unreadable gains: {text!r}"
    expected = [(4 * n / 1e6, runs["cold"][TIME, n] / runs["warm"][TIME, n]) for n in sizes(ncu_recorded)]
    assert len(gains) == 3, f"the verdict must give a cold / warm ratio for each of the three inputs: {text!r}"
    for (mb, gain), (want_mb, want_gain) in zip(gains, expected, strict=True):
        assert mb == pytest.approx(want_mb, abs=0.06), (
            f"the verdict labels an input {mb} MB, but its size is {want_mb:.2f} MB (4 bytes a float, sizes in order)"
        )
        assert gain == pytest.approx(want_gain, abs=0.006), (
            f"the verdict's ratio at {want_mb:.1f} MB is {gain}x, but cold time / warm time there is {want_gain:.3f}"
        )


def test_section_4_says_a_warm_l2_sped_up_the_smallest_input_only_when_it_ran_3_percent_faster(ncu_recorded):
    sentence, runs = shown(ncu_recorded)[1], measured(ncu_recorded)
    eighth = sizes(ncu_recorded)[0]
    gain = runs["cold"][TIME, eighth] / runs["warm"][TIME, eighth]
    expected = "a warm L2 sped up the smallest input" if gain > 1.03 else "no input ran measurably faster warm"
    assert sentence == expected, (
        f"the verdict says {sentence!r}, but the smallest input ran {gain:.3f}x as fast warm (the threshold is 1.03)"
    )


def test_section_4s_verdict_gives_the_base_and_boost_sm_clock_and_time_at_the_large_input(ncu_recorded):
    match, runs = shown(ncu_recorded), measured(ncu_recorded)
    large = sizes(ncu_recorded)[2]
    base_mhz, cold_mhz = runs["base clock"][SM_CLOCK, large] / 1e6, runs["cold"][SM_CLOCK, large] / 1e6
    assert float(match[3].replace(",", "")) == pytest.approx(base_mhz, abs=0.6), (
        f"the verdict's base clock {match[3]} MHz is not the base-clock call's SM clock at the large input, "
        f"{base_mhz:.1f} MHz (Hz -> MHz)"
    )
    assert float(match[4].replace(",", "")) == pytest.approx(cold_mhz, abs=0.6), (
        f"the verdict compares with {match[4]} MHz, but the cold call's SM clock at the large input is "
        f"{cold_mhz:.1f} MHz"
    )
    slower = runs["base clock"][TIME, large] / runs["cold"][TIME, large]
    assert float(match[5]) == pytest.approx(slower, abs=0.0006), (
        f"the verdict's {match[5]}x is not base-clock time / cold time at the large input = {slower:.4f}"
    )


def test_section_4s_conditions_are_physically_plausible(ncu_recorded):
    ncu_recorded.section(4)
    runs, (eighth, _, large) = measured(ncu_recorded), sizes(ncu_recorded)
    rated_mhz = ncu_recorded.value("int(condition_frames['cold'].ComputeClock.iloc[0])") / 1e3  # kHz
    cold_mhz, base_mhz = runs["cold"][SM_CLOCK, large] / 1e6, runs["base clock"][SM_CLOCK, large] / 1e6
    assert 0.5 * rated_mhz < cold_mhz < 1.02 * rated_mhz, f"the boosting SMs ran at {cold_mhz:.0f} MHz of {rated_mhz}"
    assert base_mhz < 0.97 * cold_mhz, f"clock_control='base' did not slow the SMs: {base_mhz:.0f} / {cold_mhz:.0f}"
    large_gain = runs["cold"][TIME, large] / runs["warm"][TIME, large]
    assert 0.95 < large_gain < 1.05, f"the large input ran {large_gain:.3f}x as fast warm: the flush mattered?"
    slower = runs["base clock"][TIME, large] / runs["cold"][TIME, large]
    assert 0.95 < slower < 1.5, f"a DRAM-bound kernel took {slower:.3f}x as long at base clock"
    dram = runs["cold"][DRAM_READ, large]
    assert dram == pytest.approx(4 * large, rel=0.1), f"a cold x * 2 of {4 * large} bytes read {dram} B"
    assert runs["warm"][DRAM_READ, eighth] < runs["cold"][DRAM_READ, eighth], "a warm small input read more DRAM"
    gbs = 2 * 4 * large / runs["cold"][TIME, large] / 1e9  # x read, 2x written
    _, peaks = lookup_peaks(ncu_recorded.recording["provenance"]["gpu"])
    assert peaks and 5 < 100 * gbs / peaks["dram_gbs"] <= 100, f"x * 2 at the large input moved {gbs:.0f} GB/s"


def test_section_4s_verdict_leaves_the_benchmarks_that_s4_run_calls_callable(ncu_recorded):
    ncu_recorded.section(4)
    kinds = ncu_recorded.value("{name: callable(globals()[name]) for name in ('cold', 'warm', 'base_clock')}")
    assert all(kinds.values()), f"after section 4, s4-run could not run again: callable? {kinds} (s4-verdict)"
