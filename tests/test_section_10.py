"""Section 10, the evidence a call leaves: section 8's "off" folder, its report, and the softmax profiled with ncu's
sections, against the files and reports the Nsight Compute recordings hold."""

import re
from pathlib import Path

import ncu_report
import pandas as pd
import pytest
import recordings
from support import TO_BASE

TIME = "gpu__time_duration.sum"
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")
FILES = re.compile(
    r"the call left (\d+) files; processed_data (equals|differs from) the frame; the report holds (\d+) launches, "
    r"the first timed (as|unlike) the CSV's first run"
)
SAID = {"equals": True, "differs from": False, "as": True, "unlike": False}  # the verdict's words for True/False
STALLS = re.compile(
    r"the softmax \((\d+)% of its memory roof in section 6\) waited most on (\w+) \(([\d.]+) cycles per issued "
    r"instruction\), then (\w+) \(([\d.]+)\), (.+)$"
)
EVIDENCE = (r".*\.ncu-rep", r".*\.log", r"profiled_data-.*\.csv", r"processed_data-.*\.csv", "collected_info.pkl")
IN_NS = {unit: TO_BASE[unit] / 1e-9 for unit in ("ns", "nsecond", "us", "usecond", "ms", "msecond", "s", "second")}
CLOSE, APART = "so close that their order can swap", "clearly apart"


def run_sections(recorded) -> str:
    recorded.section(6)  # section 10 reads section 6's bound (the softmax's % of roof) and section 8's "off" call
    recorded.section(8)
    return recorded.section(10)


def launches_of(path: Path) -> list:
    report = ncu_report.load_report(str(path))
    ranges = [report.range_by_idx(r) for r in range(report.num_ranges())]
    return [each.action_by_idx(a) for each in ranges for a in range(each.num_actions())]


def off_folder(recorded) -> Path:
    return Path(recorded.value("str(out_prefix('s8_off'))"))


def softmax_launch(recorded):
    launches = launches_of(Path(recorded.value("str(softmax_report)")))
    assert len(launches) == 1, f"ncu profiled {len(launches)} launches of the softmax, not one (s10-tools)"
    return launches[0]


def test_section_10_runs_on_each_recording_and_prints_both_verdicts(ncu_recorded):
    printed = run_sections(ncu_recorded)
    gpu = ncu_recorded.recording["provenance"]["gpu"]
    for start in ("the call left", "the softmax ("):
        assert f"On this {gpu}: {start}" in printed, (
            f"section 10 printed no verdict beginning {start!r} on {ncu_recorded.folder.name}; its verdict cells "
            f"must call verdict(10, ...):\n{printed[-1500:]}"
        )


def test_section_10s_file_verdict_counts_the_off_calls_files_and_its_csv_is_the_frame(ncu_recorded):
    run_sections(ncu_recorded)
    folder = off_folder(ncu_recorded)
    files = sorted(path.name for path in folder.iterdir())
    for pattern in (
        r".*\.ncu-rep",
        r".*\.log",
        r"profiled_data-.*\.csv",
        r"processed_data-.*\.csv",
        "collected_info.pkl",
    ):
        assert sum(bool(re.fullmatch(pattern, name)) for name in files) == 1, f"{folder} holds {files}: {pattern}?"
    processed = pd.read_csv(next(folder.glob("processed_data-*.csv")))
    frame = ncu_recorded.recording["variables"]["thermal"]["off"]["frame"]
    same = list(processed.columns) == list(frame.columns) and processed.AvgValue.tolist() == frame.AvgValue.tolist()
    assert same, f"off's processed_data CSV is not its to_dataframe(): {list(processed.columns)}"
    assert ncu_recorded.value("bool(same_frame)") is same, "s10-csv compares the CSV with another call's frame"
    text = ncu_recorded.value("SECTIONS[10]['headline']")
    shown = FILES.search(text)
    assert shown, f"section 10's first verdict does not read as files, frame, launches and first time: {text!r}"
    assert int(shown[1]) == len(files) and SAID[shown[2]] == same, (
        f"the off call left {len(files)} files and its CSV matches the frame: {same}; the verdict says {text!r} "
        "(s10-verdict)"
    )


def test_section_10s_report_holds_one_launch_per_run_timed_as_the_per_run_csv(ncu_recorded):
    run_sections(ncu_recorded)
    launches = launches_of(next(off_folder(ncu_recorded).glob("*.ncu-rep")))
    runs = ncu_recorded.recording["variables"]["thermal"]["off"]["runs"]
    assert len(launches) == len(runs) == 30, f"{len(launches)} launches in off's report for {len(runs)} runs"
    times = [launch[TIME].value() * IN_NS[launch[TIME].unit()] for launch in launches]
    assert times == pytest.approx(runs.Value.tolist(), rel=1e-6), "the report's launches are not the CSV's runs"
    assert ncu_recorded.value("len(launches)") == 30, "s10-report lists the report's launches incompletely"
    text = ncu_recorded.value("SECTIONS[10]['headline']")
    shown = FILES.search(text)
    assert shown and int(shown[3]) == 30 and SAID[shown[4]] is True, (
        f"the report holds 30 launches and its first time {times[0]:.0f} ns is the CSV's first run's "
        f"{runs.Value.iloc[0]:.0f} ns; the verdict says {text!r} (s10-report, s10-verdict)"
    )


def test_section_10s_stalls_are_the_reports_reasons_largest_first_without_selected(ncu_recorded):
    run_sections(ncu_recorded)
    launch = softmax_launch(ncu_recorded)
    reasons = {match[1]: launch[match[0]].value() for match in map(STALL.fullmatch, launch.metric_names()) if match}
    assert "selected" in reasons, f"the report has no 'selected' cycles to leave out: {sorted(reasons)}"
    stalls = sorted(((k, v) for k, v in reasons.items() if k != "selected"), key=lambda item: -item[1])
    shown = ncu_recorded.value("[[k, v] for k, v in softmax['stalls'].items()]")
    assert dict(shown) == pytest.approx(dict(stalls), rel=1e-9), (
        f"softmax['stalls'] should be the report's stall reasons with 'selected' left out: {sorted(dict(shown))}"
    )
    values = [v for _, v in shown]
    assert values == sorted(values, reverse=True), f"softmax['stalls'] is not largest first: {shown[:4]}"
    assert "softmax" in ncu_recorded.value("softmax['kernel']"), "softmax['kernel'] is another kernel than the softmax"
    per_issue = launch["smsp__average_warp_latency_per_inst_issued.ratio"].value()
    total = sum(reasons.values())
    assert min(reasons.values()) >= 0 and total == pytest.approx(per_issue, rel=0.05), (
        f"the stall reasons with 'selected' add up to {total:.2f} cycles, not the {per_issue:.2f} cycles per issued "
        "instruction they split"
    )
    (first, most), (second, next_most) = stalls[:2]
    text = ncu_recorded.value("SECTIONS[10]['headline']")
    verdict = STALLS.search(text)
    assert verdict, f"section 10's stall verdict does not read as the top two reasons and their order: {text!r}"
    assert (verdict[2], verdict[4]) == (first, second), (
        f"the softmax waited most on {first} ({most:.2f}), then {second} ({next_most:.2f}): {text!r}"
    )
    assert [float(verdict[3]), float(verdict[5])] == pytest.approx([most, next_most], abs=0.0051), text
    wording = CLOSE if next_most > 0.9 * most else APART
    assert verdict[6].startswith(wording), (
        f"{second} at {next_most / most:.0%} of {first} calls for {wording!r} (within 10%: can swap): {text!r} "
        "(s10-stalls-verdict)"
    )


def test_section_10s_softmax_is_at_its_memory_roof_share_from_section_6s_time(ncu_recorded):
    run_sections(ncu_recorded)
    variables = ncu_recorded.recording["variables"]
    frame = variables["bound_frame"]
    row = frame[(frame.Annotation == "row softmax") & (frame.Metric == TIME)].iloc[0]
    assert row.Unit == "ns", f"section 6's softmax time is in {row.Unit}"
    peaks = ncu_recorded.peaks()
    rows, columns = variables["ROWS"], variables["COLUMNS"]
    must_move = 2 * rows * columns * 4  # reads and writes a float32 ROWS x COLUMNS tensor once
    assert 5 / 8 * peaks["dram_gbs"] / 1e3 < peaks["fp32_tflops"], "the softmax should lie left of the ridge"
    pct = 100 * must_move / (row.AvgValue * 1e-9) / (peaks["dram_gbs"] * 1e9)
    assert 10 < pct <= 100, f"a softmax streaming {must_move / 1e6:.0f} MB at {pct:.0f}% of DRAM bandwidth"
    assert ncu_recorded.value("float(bound.loc['row softmax', '% of roof'])") == pytest.approx(pct, rel=1e-6)
    text = ncu_recorded.value("SECTIONS[10]['headline']")
    verdict = STALLS.search(text)
    assert verdict and int(verdict[1]) == round(pct), (
        f"the softmax reached {pct:.0f}% of its memory roof in section 6: {text!r} (s10-stalls-verdict)"
    )
    duration = softmax_launch(ncu_recorded)[TIME]
    profiled = duration.value() * IN_NS[duration.unit()]
    assert profiled == pytest.approx(row.AvgValue, rel=0.3), (
        f"ncu's softmax ({profiled:.0f} ns) is not section 6's ({row.AvgValue:.0f} ns): not the same shape (s10-define)"
    )


def test_section_10s_stall_order_wording_turns_where_the_second_reason_falls_below_nine_tenths_of_the_first(
    ncu_recorded,
):
    """The recording's top two may lie on either side of the line: run the section's last cell, its stall verdict,
    on the recorded stalls with the second set to 0.95 and to 0.85 of the first, then put everything back."""
    run_sections(ncu_recorded)
    last = recordings.cpu_section_sources(ncu_recorded.cells, 10)[-1][2]
    assert "verdict(10" in last, "section 10's last cell should state its stall verdict"
    kept = ncu_recorded.value("SECTIONS[10]['headline']")
    ncu_recorded.session.run("_recorded_stalls = softmax['stalls'].copy()")
    chosen = {}
    try:
        for share in (0.95, 0.85):
            ncu_recorded.session.run(
                "softmax['stalls'] = _recorded_stalls.copy()\n"
                f"softmax['stalls'].iloc[1] = {share} * softmax['stalls'].iloc[0]"
            )
            ncu_recorded.session.run(last)
            chosen[share] = ncu_recorded.value("SECTIONS[10]['headline']").rsplit("; ", 1)[-1]
    finally:
        ncu_recorded.session.run(f"softmax['stalls'] = _recorded_stalls\nSECTIONS[10]['headline'] = {kept!r}")
    for share, wording in ((0.95, CLOSE), (0.85, APART)):
        shown = STALLS.search(chosen[share])
        assert shown and shown[6].startswith(wording), (
            f"with the second stall reason at {share:.0%} of the first the verdict should say {wording!r} (more than "
            f"0.9 x: their order can swap): {chosen[share]!r} (s10-stalls-verdict)"
        )
