"""Section 8, thermal control: table, verdict and figure against each mode's recorded runs, on both backends."""

import pandas as pd
import pytest
from nsight.thermovision import DEFAULT_THERMAL_WAIT  # the margin (C) at which "auto" pauses
from pytest import approx
from support import parse

MODES = ["auto", "manual", "off"]
LATE_S = 0.4  # a run that starts this much later than the median gap waited (nsight polls every 0.5 s)
EFFECT = "{} s over 30 runs, spread {}% (off: {}%)"
MANUAL = "; manual (pausing 1 C above off's lowest margin) paused {}x: " + EFFECT
PAUSED = "auto paused {}x: " + EFFECT + MANUAL
NEVER = "auto never paused (lowest margin {} C, above its {} C), so it ran as off did" + MANUAL


def thermal(recorded) -> dict:
    calls = recorded.bound(8)["thermal"]
    assert sorted(calls) == MODES, f"the recording's thermal holds {sorted(calls)}, not {MODES}"
    return calls


def pauses(runs, pause_at) -> int:
    """Late starts right after a margin at the mode's pause line (+1 C of drift); none where a mode never pauses."""
    late = runs.started_s.diff() > runs.started_s.diff().median() + LATE_S
    return 0 if pause_at is None else int((late & (runs.margin_c.shift() <= pause_at + 1)).sum())


def expected_table(calls) -> dict:
    lines = {"off": None, "auto": DEFAULT_THERMAL_WAIT, "manual": calls["manual"].get("thermal_wait", 10)}
    return {
        mode: {
            "mean (us)": runs.Value.mean() / 1e3,
            "RSD %": 100 * runs.Value.std() / runs.Value.mean(),
            "runs took (s)": runs.started_s.max() - runs.started_s.min(),
            "pauses": pauses(runs, lines[mode]),
            "lowest margin (C)": runs.margin_c.min(),
        }
        for mode, runs in ((mode, call["runs"]) for mode, call in calls.items())
    }


def test_section_8s_table_is_each_modes_own_runs_in_us_percent_seconds_and_celsius(recorded):
    calls = thermal(recorded)
    recorded.section(8)
    table = recorded.value("thermal_table.to_dict()")
    for mode, expected in expected_table(calls).items():
        assert {k: table[mode][k] for k in expected} == approx(expected, rel=1e-6), f"{mode}: its own runs, ns -> us"
        sm = calls[mode]["runs"].sm_mhz
        assert table[mode]["SM clock (MHz)"] == f"{sm.min():.0f}-{sm.max():.0f}", f"{mode}'s SM clock range"


def test_section_8s_pause_is_a_start_more_than_0_4_s_later_than_the_median_gap(recorded):
    gaps = [0.1] * 10 + [0.45] + [0.1] * 5 + [0.53] + [0.1] * 5 + [0.48] + [0.1] * 6  # 0.35, 0.43, 0.38 s late
    starts = [round(sum(gaps[:k]), 6) for k in range(len(gaps) + 1)]
    recorded.section(8)
    counted = recorded.value(f"pauses(pd.DataFrame({{'started_s': {starts}, 'margin_c': {[5] * len(starts)}}}), 10)")
    assert counted == pauses(pd.DataFrame({"started_s": starts, "margin_c": 5}), 10) == 1, f"only one {LATE_S} s late"


def test_section_8s_manual_run_paused_1_c_above_offs_lowest_margin_and_resumed_2_c_higher(recorded):
    calls = thermal(recorded)
    low, high = calls["off"]["runs"].margin_c.min(), calls["off"]["runs"].margin_c.max()
    expected = {"thermal_wait": int(low) + 1, "thermal_cont": int(min(low + 3, high))} if high >= low + 2 else {}
    recorded.section(8)
    assert recorded.value("manual_thresholds(thermal['off']['runs'].margin_c)") == expected, f"off: {low}-{high} C"
    assert {k: calls["manual"][k] for k in expected} == expected, "the manual run used other thresholds"


def check_verdict(findings, table, lowest_auto_margin):
    """The verdict against the table of the runs it summarises: auto's pauses (or why none), each mode's price."""
    off = table["off"]

    def price(mode):
        return [table[mode]["runs took (s)"] - off["runs took (s)"], table[mode]["RSD %"], off["RSD %"]]

    manual = [table["manual"]["pauses"], *price("manual")]
    if table["auto"]["pauses"]:
        shown, expected = parse(PAUSED, findings), [table["auto"]["pauses"], *price("auto"), *manual]
    else:
        shown, expected = parse(NEVER, findings), [round(lowest_auto_margin), DEFAULT_THERMAL_WAIT, *manual]
    assert shown == approx(expected, abs=0.051), "auto's pauses and price (or lowest margin and trigger), manual's"


def test_section_8s_verdict_states_autos_pauses_and_price_and_manuals_from_their_runs(recorded):
    calls = thermal(recorded)
    check_verdict(recorded.findings(8), expected_table(calls), calls["auto"]["runs"].margin_c.min())


@pytest.mark.parametrize("late", [False, True], ids=["auto-never-paused", "auto-paused-once"])
def test_section_8s_verdict_says_whether_auto_paused_when_its_runs_do_or_do_not_start_late(recorded, late):
    change = (
        "_runs = thermal['auto']['runs'].copy()\n"
        "_runs['started_s'] = [0.1 * k + (1.0 if " + str(late) + " and k >= 10 else 0) for k in range(len(_runs))]\n"
        f"_runs['margin_c'] = [5 if k == 9 and {late} else 30 for k in range(len(_runs))]\n"
        "thermal = {**thermal, 'auto': {**thermal['auto'], 'runs': _runs}}"
    )
    rerun = recorded.altered(8, change, "thermal_table.to_dict()")
    assert rerun["read"]["auto"]["pauses"] == int(late), f"auto's runs started late {int(late)} time(s)"
    check_verdict(rerun["findings"], rerun["read"], 5 if late else 30)


def test_section_8s_figure_is_the_off_runs_mean_as_2_n_cubed_fp16_flops(recorded):
    tflops = 2 * 4096**3 / (thermal(recorded)["off"]["runs"].Value.mean() * 1e-9) / 1e12
    recorded.check_figure(8, "fp16 product, n=4096, after load", tflops, "TFLOP/s", "fp16_tflops")
