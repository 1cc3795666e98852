"""Section 4, cache and clock control: cold/warm L2 and base/boost clock against the recorded rows (ncu)."""

import pytest
from pytest import approx
from support import TO_BASE, parse

VERDICT = (
    "{} (cold / warm time: {} MB {}x, {} MB {}x, {} MB {}x); base clock held the SMs at {} MHz against {}, and the "
    "large input took {}x as long"
)
TIME, SM_CLOCK = "gpu__time_duration.sum", "gpc__cycles_elapsed.avg.per_second"
SPED_UP, NOT_FASTER = "a warm L2 sped up the smallest input", "no input ran measurably faster warm"


def measured(recorded) -> dict:
    """condition -> {(metric, n): AvgValue in seconds, bytes, Hz or %}, from the frames s4-run bound."""
    frames = recorded.bound(4)["condition_frames"]
    assert sorted(frames) == ["base clock", "cold", "warm"], f"condition_frames holds {sorted(frames)}"
    return {name: {(r.Metric, r.n): r.AvgValue * TO_BASE[r.Unit] for r in f.itertuples()} for name, f in frames.items()}


def sizes(recorded) -> list[int]:
    """An eighth and a quarter of L2 and sixteen times it, in float32 elements, from the recorded L2 size."""
    l2_bytes = recorded.recording["environment"]["l2_bytes"]
    return [l2_bytes // 8 // 4, l2_bytes // 4 // 4, 16 * l2_bytes // 4]


def test_section_4s_conditions_ran_at_the_sizes_the_lesson_names_and_stay_callable(recorded):
    runs, (eighth, quarter, large) = measured(recorded), sizes(recorded)
    ran = {name: sorted({n for _, n in runs[name]}) for name in runs}
    assert ran == {"cold": [eighth, quarter, large], "warm": [eighth, quarter, large], "base clock": [quarter, large]}
    recorded.section(4)
    assert recorded.value("[callable(cold), callable(warm), callable(base_clock)]") == [True] * 3, (
        "after section 4 its benchmarks were rebound: its run cell could not run again"
    )


def test_section_4s_verdict_gives_cold_over_warm_time_per_size_and_the_base_and_boost_clock(recorded):
    runs, (eighth, quarter, large) = measured(recorded), sizes(recorded)
    said, *gains, base_mhz, boost_mhz, slower = recorded.shown(4, VERDICT)
    ns = (eighth, quarter, large)
    mb, ratio = [4 * n / 1e6 for n in ns], [runs["cold"][TIME, n] / runs["warm"][TIME, n] for n in ns]
    assert gains[0::2] == approx(mb, abs=0.06) and gains[1::2] == approx(ratio, abs=0.006), "MB and cold / warm time"
    assert said == (SPED_UP if ratio[0] > 1.03 else NOT_FASTER), f"{said!r} at {ratio[0]:.3f}x for the smallest"
    clocks = [runs["base clock"][SM_CLOCK, large] / 1e6, runs["cold"][SM_CLOCK, large] / 1e6]
    assert [base_mhz, boost_mhz] == approx(clocks, abs=0.6), "the base and cold calls' SM clock at the large input"
    assert clocks[0] < 0.97 * clocks[1], f"clock_control='base' did not slow the SMs in the recording: {clocks}"
    assert slower == approx(runs["base clock"][TIME, large] / runs["cold"][TIME, large], abs=6e-4), "base / cold time"


@pytest.mark.parametrize(("gain", "said"), [(1.05, SPED_UP), (1.01, NOT_FASTER)])
def test_section_4_says_a_warm_l2_sped_up_the_smallest_input_only_above_3_percent(recorded, gain, said):
    change = (
        "_warm, _cold = condition_frames['warm'].copy(), condition_frames['cold']\n"
        "_at = (_warm.n == EIGHTH) & (_warm.Metric == 'gpu__time_duration.sum')\n"
        f"_warm.loc[_at, 'AvgValue'] = _cold.loc[_at.values, 'AvgValue'].values / {gain}\n"
        "condition_frames = {**condition_frames, 'warm': _warm}"
    )
    findings = recorded.altered(4, change)["findings"]
    assert parse(VERDICT, findings)[0] == said, f"the smallest input {gain}x as fast warm: {findings}"
