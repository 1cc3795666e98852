"""Section 4, cache and clock settings: cold/warm time per size and the base-clock call's measured SM clock, against
the recorded rows and calls (Nsight Compute only)."""

import re
import types

import pytest
import recordings
from pytest import approx
from support import TO_BASE

from plumbing.cells import SECTION_PLAN

TIME, SM_CLOCK = "gpu__time_duration.sum", "gpc__cycles_elapsed.avg.per_second"
VERDICT = re.compile(r"cold / warm (.+); base clock (.+): ([\d,]+) MHz against ([\d,]+)$")
ONE_SIZE = re.compile(r"([\d.]+) MB ([\d.]+)x( \(within noise\))?")
LOWERED, UNLOCKED = "lowered the SMs", "left the SMs unlocked in this run"


def rows(recorded) -> dict:
    """condition -> {(metric, n): the row}, from the frames s4-run bound."""
    frames = recorded.bound(4)["condition_frames"]
    assert sorted(frames) == ["base clock", "cold", "warm"], f"condition_frames holds {sorted(frames)}"
    return {name: {(r.Metric, r.n): r for r in frame.itertuples()} for name, frame in frames.items()}


def verdict(findings: list[str]) -> tuple[list, str, float, float]:
    (match,) = [m for m in map(VERDICT.match, findings) if m]
    sizes = [(float(mb), float(ratio), bool(noise)) for mb, ratio, noise in ONE_SIZE.findall(match.group(1))]
    return sizes, match.group(2), *(float(mhz.replace(",", "")) for mhz in match.group(3, 4))


def test_section_4_ran_every_condition_at_an_eighth_and_a_quarter_of_l2_and_sixteen_times_it(recorded):
    bound, measured = recorded.bound(4), rows(recorded)
    l2 = recorded.recording["environment"]["l2_bytes"]
    assert bound["l2"] == l2 and bound["SIZES"] == [l2 // 32, l2 // 16, 4 * l2], "float32 elements of L2/8, L2/4, 16 L2"
    ran = {name: sorted({n for _, n in runs}) for name, runs in measured.items()}
    assert ran == dict.fromkeys(["base clock", "cold", "warm"], bound["SIZES"]), ran
    recorded.section(4)
    assert recorded.value("[callable(cold), callable(warm), callable(base)]") == [True] * 3, (
        "after section 4 its benchmarks were rebound: its run cell could not run again"
    )


def test_section_4s_verdict_gives_cold_over_warm_time_per_size_and_says_which_is_within_noise(recorded):
    measured, (sizes, _, _, _) = rows(recorded), verdict(recorded.findings(4))
    expected = []
    for n in recorded.bound(4)["SIZES"]:
        cold, warm = measured["cold"][TIME, n], measured["warm"][TIME, n]
        half = [(row.CI95_Upper - row.CI95_Lower) / 2 for row in (cold, warm)]  # each 95% interval's half width
        expected.append((4 * n / 1e6, cold.AvgValue / warm.AvgValue, abs(cold.AvgValue - warm.AvgValue) <= sum(half)))
    flat = [number for mb, ratio, _ in sizes for number in (mb, ratio)]
    assert flat == approx([number for mb, ratio, _ in expected for number in (mb, ratio)], abs=0.06), "MB, cold/warm"
    assert [noise for *_, noise in sizes] == [noise for *_, noise in expected], "noise: the intervals overlap"
    assert not expected[0][2] and expected[0][1] > 1, "the recording no longer shows a warm L2 speeding the smallest"


def test_section_4s_base_clock_verdict_is_the_measured_sm_clock_and_matches_what_ncu_was_given(recorded):
    measured, (_, said, base_mhz, cold_mhz) = rows(recorded), verdict(recorded.findings(4))
    sizes = recorded.bound(4)["SIZES"]
    clocks = [sum(measured[c][SM_CLOCK, n].AvgValue * TO_BASE[measured[c][SM_CLOCK, n].Unit] for n in sizes)
              / len(sizes) / 1e6 for c in ("base clock", "cold")]  # fmt: skip
    assert [base_mhz, cold_mhz] == approx(clocks, abs=0.6), "the mean SM clock over the sizes, Hz -> MHz"
    assert said == (LOWERED if clocks[0] < 0.97 * clocks[1] else UNLOCKED), f"{said!r} at {clocks}"
    (call,) = [c for c in recorded.recording["calls"] if c["section"] == 4 and c["clock_control"] == "base"]
    if call.get("ncu_clock_control", "base") == "none":  # the runner: ncu was told to leave the clocks alone
        assert said == UNLOCKED, "ncu ran the base-clock call with --clock-control none: nothing can have been locked"


@pytest.mark.parametrize(("factor", "said"), [(0.75, LOWERED), (1.0, UNLOCKED)])
def test_section_4_says_base_clock_lowered_the_sms_only_when_their_measured_clock_fell(recorded, factor, said):
    change = (
        "_base = condition_frames['base clock'].copy()\n"
        "_clock = _base.Metric == 'gpc__cycles_elapsed.avg.per_second'\n"
        "_cold = condition_frames['cold'].loc[condition_frames['cold'].Metric == _base.Metric[_clock].iloc[0]]\n"
        f"_base.loc[_clock, 'AvgValue'] = _cold.AvgValue.values * {factor}\n"
        "condition_frames = {**condition_frames, 'base clock': _base}"
    )
    _, found, *_ = verdict(recorded.altered(4, change)["findings"])
    assert found == said, f"SM clock at base {factor}x the cold one: {found}"


def test_section_4s_table_converts_each_metric_to_the_unit_its_column_names(recorded):
    recorded.section(4)
    table = recorded.value("conditions.reset_index().to_dict('records')")
    measured = rows(recorded)
    units = {
        "time (us)": (TIME, 1e-6),
        "SM clock (MHz)": (SM_CLOCK, 1e6),
        "DRAM read (MB)": ("dram__bytes_read.sum", 1e6),
    }
    for shown in table:
        for column, (metric, scale) in units.items():
            row = measured[shown["condition"]][metric, shown["n"]]
            assert shown[column] == approx(row.AvgValue * TO_BASE[row.Unit] / scale), f"{column} of {shown}"


def test_section_4s_sizes_cell_makes_an_eighth_and_a_quarter_of_the_l2_and_sixteen_times_it_in_float32s(recorded):
    l2 = recorded.recording["environment"]["l2_bytes"]
    gpu = types.SimpleNamespace(L2_cache_size=l2)  # what torch.cuda.get_device_properties(0) reports
    namespace = {"torch": types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=lambda _: gpu))}
    exec(recordings.cell_source(recordings.load_cells(), SECTION_PLAN[4]["gpu_define"][0]), namespace)
    assert [4 * n for n in namespace["SIZES"]] == [l2 / 8, l2 / 4, 16 * l2], "float32 elements, 4 bytes each"
    assert namespace["SIZES"] == recorded.bound(4)["SIZES"], "the recording ran other sizes than the cell makes"


@pytest.mark.parametrize(("apart", "noise"), [(0.9, True), (1.1, False)])
def test_section_4_calls_a_cold_warm_gap_noise_while_the_two_intervals_overlap(recorded, apart, noise):
    change = (
        "_cold, _warm = condition_frames['cold'], condition_frames['warm'].copy()\n"
        "_t = _warm.Metric == 'gpu__time_duration.sum'\n"
        "_half = lambda f: (f.CI95_Upper - f.CI95_Lower).values[_t.values] / 2\n"
        f"_gap = {apart} * (_half(_cold) + _half(_warm))\n"
        "_shift = _cold.AvgValue.values[_t.values] - _gap - _warm.AvgValue[_t].values\n"
        "for _c in ('AvgValue', 'CI95_Lower', 'CI95_Upper'):\n"
        "    _warm.loc[_t, _c] = _warm.loc[_t, _c].values + _shift\n"
        "condition_frames = {**condition_frames, 'warm': _warm}"
    )
    sizes, *_ = verdict(recorded.altered(4, change)["findings"])
    assert [within for *_, within in sizes] == [noise] * 3, f"a gap of {apart} x the two half widths: {sizes}"
