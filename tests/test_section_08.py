"""Section 8, thermal control: its table, verdict and figure against the per-run CSVs each mode recorded, on both
backends."""

import re

import nbformat
import pandas as pd
import pytest
from nsight.thermovision import DEFAULT_THERMAL_WAIT  # the margin (C) at which "auto" pauses
from support import NOTEBOOK, section_code_cells

MODES = ("off", "auto", "manual")
# The load before each run, as section 8's define cell writes it: the recorded calls must have taken 30 or more.
NB = nbformat.read(NOTEBOOK, as_version=4)
LOAD_S = float(re.search(r"perf_counter\(\) \+ ([\d.]+)", "".join(c.source for c in section_code_cells(NB, 8)))[1])
LATE_S = 0.4  # a run that starts this much later than the median gap waited (nsight polls every 0.5 s)
EFFECT = r"([+-]\d+\.\d) s over 30 runs, spread (\d+\.\d)% \(off: (\d+\.\d)%\)"  # a mode's cost and spread
AUTO_PAUSED = re.compile(r"auto paused (\d+)x: " + EFFECT)
AUTO_NEVER = re.compile(r"auto never paused \(lowest margin (-?\d+) C, above its (\d+) C\), so it ran as off did")
MANUAL = re.compile(r"manual \(pausing 1 C above off's lowest margin\) paused (\d+)x: " + EFFECT)


def recorded_runs(recorded):
    """{mode: what the run cell bound for it}: the frame, the per-run CSV, the wall time and any thresholds."""
    thermal = recorded.recording["variables"]["thermal"]
    assert sorted(thermal) == sorted(MODES), f"the recording's thermal holds {sorted(thermal)}, not {MODES}"
    return thermal


def late_starts(runs) -> pd.Series:
    gaps = runs.started_s.diff()
    return gaps > gaps.median() + LATE_S


def thermal_pauses(runs, pause_at) -> int:
    """Late starts right after a margin at the mode's pause line (1 C of drift allowed between the collector's reading
    and nsight's check): what thermal control can have caused. None: the mode never pauses."""
    return 0 if pause_at is None else int((late_starts(runs) & (runs.margin_c.shift() <= pause_at + 1)).sum())


def pause_line(recorded, mode):
    """The margin (C) at which `mode` pauses: never for off, nsight's default for auto, its own for manual."""
    return {"off": None, "auto": DEFAULT_THERMAL_WAIT}.get(
        mode, recorded_runs(recorded)["manual"].get("thermal_wait", DEFAULT_THERMAL_WAIT)
    )


def headline(recorded) -> str:
    recorded.section(8)
    return recorded.value("SECTIONS[8]['headline']")


def test_section_8_runs_on_each_recording_and_prints_its_verdict(recorded):
    printed = recorded.section(8)
    gpu = recorded.recording["provenance"]["gpu"]
    line = next((line for line in printed.splitlines() if line.startswith(f"On this {gpu}: auto ")), None)
    assert line and MANUAL.search(line), (
        f"section 8 printed no verdict on auto and manual on {recorded.folder.name}; its verdict cell must call "
        f"verdict(8, ...):\n{printed[-1500:]}"
    )


def test_section_8s_recorded_runs_are_thirty_loaded_fp16_4096_products_per_mode(recorded):
    for mode, call in recorded_runs(recorded).items():
        runs = call["runs"]
        assert len(runs) == 30 and set(runs.n) == {4096} and set(runs.Annotation) == {"fp16 product"}, (
            f"{mode}: the per-run CSV holds {len(runs)} runs of {set(runs.n)} / {set(runs.Annotation)}: s8-define "
            "profiles 30 runs of the 4096 fp16 product"
        )
        assert set(runs.Unit) == {"ns"} and runs.Kernel.nunique() == 1, f"{mode}: {set(runs.Unit)}, {set(runs.Kernel)}"
        assert runs.started_s.is_monotonic_increasing, f"{mode}: the RUN collector's start times go backwards"
        span = runs.started_s.iloc[-1] - runs.started_s.iloc[0]
        assert call["wall_s"] > max(span, 30 * LOAD_S), (
            f"{mode}: {call['wall_s']:.2f} s of wall time for 30 runs that each start with {LOAD_S} s of load and span "
            f"{span:.2f} s: the wall clock in s8-run must hold the whole call"
        )
        assert runs.sm_mhz.between(100, 2500).all() and runs.margin_c.between(-5, 120).all(), (
            f"{mode}: SM clocks {runs.sm_mhz.min()}-{runs.sm_mhz.max()} MHz, margins {runs.margin_c.min()}-"
            f"{runs.margin_c.max()} C are not a GPU's (the ANNOTATION collectors in s8-collectors)"
        )
    means = {mode: call["runs"].Value.mean() for mode, call in recorded_runs(recorded).items()}
    assert max(means.values()) < 1.3 * min(means.values()), f"one product, three modes, far apart: {means} ns"


def test_section_8s_table_is_each_modes_own_runs_in_us_percent_seconds_and_celsius(recorded):
    recorded.section(8)
    table = recorded.value("thermal_table.to_dict()")
    assert sorted(table) == sorted(MODES), f"thermal_table's columns are {sorted(table)}, not the modes {MODES}"
    for mode, call in recorded_runs(recorded).items():
        runs, row = call["runs"], table[mode]
        mean_ns = runs.Value.mean()
        expected = {
            "mean (us)": mean_ns / 1e3,
            "RSD %": 100 * runs.Value.std() / mean_ns,
            "runs took (s)": runs.started_s.max() - runs.started_s.min(),
            "pauses": thermal_pauses(runs, pause_line(recorded, mode)),
            "lowest margin (C)": runs.margin_c.min(),
        }
        for column, value in expected.items():
            assert row[column] == pytest.approx(value, rel=1e-6), (
                f"thermal_table's {column!r} for {mode} is {row[column]}, but {mode}'s own runs give {value}: check "
                "that column in s8-table (the mode's runs, ns -> us, runs more than median gap + 0.4 s late)"
            )
        clocks = f"{runs.sm_mhz.min():.0f}-{runs.sm_mhz.max():.0f}"
        assert row["SM clock (MHz)"] == clocks, f"thermal_table's SM clock for {mode} is {row['SM clock (MHz)']}"


def test_section_8s_pause_is_a_start_more_than_0_4_s_later_than_the_median_gap(recorded):
    """The recorded runs hardly test the line (their late starts are 0.5 s and more): starts 0.35, 0.43 and 0.38 s
    late among 0.1 s gaps must count once, as for nsight's half-second polls."""
    recorded.section(8)
    gaps = [0.1] * 10 + [0.45] + [0.1] * 5 + [0.53] + [0.1] * 5 + [0.48] + [0.1] * 6
    starts = [round(sum(gaps[:k]), 6) for k in range(len(gaps) + 1)]
    margins = [5] * len(starts)  # at every pause line
    counted = recorded.value(f"pauses(pd.DataFrame({{'started_s': {starts}, 'margin_c': {margins}}}), 10)")
    expected = thermal_pauses(pd.DataFrame({"started_s": starts, "margin_c": margins}), 10)
    assert expected == 1 and counted == expected, (
        f"pauses() counts {counted} of starts 0.35, 0.43 and 0.38 s later than the median gap; only the one "
        f"more than {LATE_S} s late is a pause (nsight polls every 0.5 s while it waits)"
    )


def test_section_8s_manual_thresholds_sit_just_above_the_lowest_margin_off_reached(recorded):
    recorded.section(8)
    margins = recorded_runs(recorded)["off"]["runs"].margin_c
    low, high = margins.min(), margins.max()
    expected = {"thermal_wait": int(low) + 1, "thermal_cont": int(min(low + 3, high))} if high >= low + 2 else {}
    derived = recorded.value("manual_thresholds(thermal['off']['runs'].margin_c)")
    assert derived == expected, (
        f"manual_thresholds gives {derived} for off's margins {int(low)}-{int(high)} C; it should pause 1 C above the "
        f"lowest and resume 2 C higher, at most at the highest: {expected} (s8-thresholds)"
    )
    manual = recorded_runs(recorded)["manual"]
    used = {key: manual[key] for key in ("thermal_wait", "thermal_cont") if key in manual}
    assert used == expected, f"the manual run used {used}, not the thresholds off's margins call for: {expected}"
    if expected:
        assert expected["thermal_wait"] < expected["thermal_cont"] <= high, f"a pause could never end: {expected}"


def test_section_8s_verdict_states_autos_price_and_spread_and_manuals_pauses_from_their_runs(recorded):
    text = headline(recorded)
    calls = recorded_runs(recorded)
    runs = {mode: call["runs"] for mode, call in calls.items()}
    paused = thermal_pauses(runs["auto"], DEFAULT_THERMAL_WAIT)
    took = {mode: run.started_s.max() - run.started_s.min() for mode, run in runs.items()}
    spread = {mode: 100 * run.Value.std() / run.Value.mean() for mode, run in runs.items()}

    def check_effect(shown, mode):
        assert float(shown[2]) == pytest.approx(took[mode] - took["off"], abs=0.051), (
            f"{mode}'s 30 runs took {took[mode] - took['off']:+.1f} s more than off's: {text!r} (s8-verdict)"
        )
        assert [float(shown[3]), float(shown[4])] == pytest.approx([spread[mode], spread["off"]], abs=0.051), (
            f"{mode}'s spread is {spread[mode]:.1f}% against off's {spread['off']:.1f}%: {text!r} (s8-verdict)"
        )

    if paused:
        shown = AUTO_PAUSED.search(text)
        assert shown and int(shown[1]) == paused, (
            f"auto's runs started late {paused} time(s); the verdict should say 'auto paused {paused}x': "
            f"{text!r} (s8-verdict)"
        )
        check_effect(shown, "auto")
        assert not AUTO_NEVER.search(text), f"the verdict says auto both paused and never paused: {text!r}"
    else:
        shown = AUTO_NEVER.search(text)
        lowest = runs["auto"].margin_c.min()
        assert shown, f"auto never started late, so the verdict should say auto never paused and why: {text!r}"
        assert int(shown[1]) == round(lowest) and int(shown[2]) == DEFAULT_THERMAL_WAIT, (
            f"the verdict's lowest margin and trigger {shown[1]} C, {shown[2]} C are not auto's lowest margin "
            f"{lowest} C and nsight's trigger {DEFAULT_THERMAL_WAIT} C: {text!r} (s8-verdict)"
        )
        assert lowest > DEFAULT_THERMAL_WAIT, (
            f"the verdict explains auto's missing pauses by a margin above the trigger, but auto's margin reached "
            f"{lowest} C <= {DEFAULT_THERMAL_WAIT} C: {text!r}"
        )
    shown_manual = MANUAL.search(text)
    manual_pauses = thermal_pauses(runs["manual"], pause_line(recorded, "manual"))
    assert shown_manual and int(shown_manual[1]) == manual_pauses, (
        f"manual paused {manual_pauses} time(s) by its runs: {text!r} (s8-verdict)"
    )
    check_effect(shown_manual, "manual")


def test_section_8s_figure_is_the_off_runs_mean_as_2_n_cubed_fp16_flops(recorded):
    recorded.section(8)
    mean_ns = recorded_runs(recorded)["off"]["runs"].Value.mean()
    tflops = 2 * 4096**3 / (mean_ns * 1e-9) / 1e12
    figure = recorded.figure(8)
    assert figure["unit"] == "TFLOP/s" and figure["peak_kind"] == "fp16_tflops", f"section 8's figure: {figure}"
    assert figure["value"] == pytest.approx(tflops, rel=1e-3), (
        f"section 8's figure is {figure['value']} TFLOP/s, but off's runs average {mean_ns:.0f} ns for 2 * 4096^3 "
        f"FLOPs: {tflops:.1f} TFLOP/s; check the mode, the FLOP count and the us -> s factor in s8-verdict"
    )
    pct = 100 * tflops / recorded.peaks()["fp16_tflops"]
    assert 20 < pct <= 100, f"a loaded fp16 4096 product at {pct:.0f}% of the tensor peak is not physical"


def test_section_8_counts_as_pauses_only_late_starts_that_thermal_control_could_have_caused(recorded):
    recorded.section(8)
    table = recorded.value("thermal_table.to_dict()")
    assert table["off"]["pauses"] == 0, (
        f"thermal_table counts {table['off']['pauses']} pause(s) for 'off', where thermal control never pauses: a late "
        "start that is not a thermal pause is counted (s8-table's pauses)"
    )
    calls = recorded_runs(recorded)
    for mode, trigger in (("auto", DEFAULT_THERMAL_WAIT), ("manual", calls["manual"].get("thermal_wait"))):
        runs = calls[mode]["runs"]
        could_have_waited = late_starts(runs) & (runs.margin_c.shift() <= (trigger or DEFAULT_THERMAL_WAIT) + 2)
        assert table[mode]["pauses"] <= int(could_have_waited.sum()), (
            f"{mode}: thermal_table has {table[mode]['pauses']} pause(s), but only {int(could_have_waited.sum())} late "
            f"start(s) came after a margin near the {trigger} C at which nsight waits (s8-table's pauses)"
        )
