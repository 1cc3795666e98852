"""Section 10, the evidence a call leaves, against the files and reports the ncu recordings hold."""

import re
from pathlib import Path

import ncu_report
import pandas as pd
import pytest
from pytest import approx
from support import TO_BASE, parse

TIME = "gpu__time_duration.sum"
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")
FILES = (
    "the call left {} files; processed_data {} the frame; the report holds {} launches, the first timed {} the CSV's "
    "first run"
)
STALLS = (
    "the softmax ({}% of its memory roof in section 6) waited most on {} ({} cycles per issued instruction), then {} "
    "({}), {}"
)
CLOSE, APART = "so close that their order can swap between runs", "clearly apart"
EVIDENCE = (r".*\.ncu-rep", r".*\.log", r"profiled_data-.*\.csv", r"processed_data-.*\.csv", "collected_info.pkl")


def launches_of(path: Path) -> list:
    report = ncu_report.load_report(str(path))
    ranges = [report.range_by_idx(r) for r in range(report.num_ranges())]
    return [each.action_by_idx(a) for each in ranges for a in range(each.num_actions())]


def in_ns(metric) -> float:
    return metric.value() * TO_BASE[metric.unit()] / 1e-9


def test_section_10s_file_verdict_counts_the_off_calls_files_launches_and_compares_csv_and_frame(recorded):
    recorded.section(10)
    folder = Path(recorded.value("str(evidence)"))
    files = sorted(path.name for path in folder.iterdir())
    assert folder == recorded.out / "s8_off", "section 10 must read section 8's off call's folder"
    assert all(sum(bool(re.fullmatch(kind, name)) for name in files) == 1 for kind in EVIDENCE), files
    processed = pd.read_csv(next(folder.glob("processed_data-*.csv")))
    frame = recorded.bound(8)["thermal"]["off"]["frame"]
    same = list(processed.columns) == list(frame.columns) and processed.AvgValue.tolist() == frame.AvgValue.tolist()
    launches, runs = launches_of(next(folder.glob("*.ncu-rep"))), recorded.bound(8)["thermal"]["off"]["runs"]
    times = [in_ns(launch[TIME]) for launch in launches]
    assert times == approx(runs.Value.tolist(), rel=1e-6), "the report's launches are not the per-run CSV's runs"
    expected = [len(files), "equals" if same else "differs from", len(runs), "as"]
    assert recorded.shown(10, FILES) == expected, "the files, CSV against frame and launches it found"


def test_section_10s_stall_verdict_is_the_reports_top_two_reasons_without_selected_and_section_6s_roof_share(recorded):
    recorded.section(10)
    (launch,) = launches_of(Path(recorded.value("str(softmax_report)")))
    reasons = {m[1]: launch[m[0]].value() for m in map(STALL.fullmatch, launch.metric_names()) if m}
    assert sum(reasons.values()) == approx(launch["smsp__average_warp_latency_per_inst_issued.ratio"].value(), rel=0.05)
    stalls = sorted(((k, v) for k, v in reasons.items() if k != "selected"), key=lambda item: -item[1])
    shown = recorded.value("list(softmax['stalls'].items())")
    assert "selected" in reasons and dict(shown) == approx(dict(stalls), rel=1e-9), "the reasons but 'selected'"
    assert [v for _, v in shown] == sorted(dict(shown).values(), reverse=True), "softmax['stalls'] is not largest first"
    frame = recorded.bound(6)["bound_frame"]
    row = frame[(frame.Annotation == "row softmax") & (frame.Metric == TIME)].iloc[0]
    pct = 100 * 2 * 8192 * 1024 * 4 / (row.AvgValue * TO_BASE[row.Unit]) / (recorded.peaks()["dram_gbs"] * 1e9)
    (first, most), (second, next_most) = stalls[:2]
    expected = [round(pct), first, approx(most, abs=0.0051), second, approx(next_most, abs=0.0051)]
    assert recorded.shown(10, STALLS) == [*expected, CLOSE if next_most > 0.9 * most else APART], (
        "section 6's memory roof share (64 MiB over its time), then the top two reasons"
    )
    assert in_ns(launch[TIME]) == approx(row.AvgValue * TO_BASE[row.Unit] / 1e-9, rel=0.3), "not section 6's softmax"


@pytest.mark.parametrize(("share", "wording"), [(0.95, CLOSE), (0.85, APART)])
def test_section_10s_stall_order_wording_turns_where_the_second_reason_falls_below_nine_tenths_of_the_first(
    recorded, share, wording
):
    moved = f"stalls = found['stalls'].copy(); stalls.iloc[1] = {share} * stalls.iloc[0]"
    change = f"_read = read_sections\ndef read_sections(path):\n    found = _read(path)\n    {moved}\n"
    change += "    return {**found, 'stalls': stalls}\n"
    findings = recorded.altered(10, change)["findings"]
    assert parse(STALLS, findings)[-1] == wording, f"with the second stall at {share:.0%} of the first: {findings}"


@pytest.mark.parametrize(
    ("shift", "wording"), [("np.nextafter(v, np.inf)", "equals"), ("v * (1 + 1e-9)", "differs from")]
)
def test_section_10_calls_the_csv_the_frame_up_to_its_last_digit_and_no_further(recorded, shift, wording):
    change = (  # the CSV as read back, its AvgValue moved: by one last digit (a CSV round trip can) or by 1e-9
        "import types\n_pd = pd\ndef _csv(*args, **kwargs):\n    v = (read := _pd.read_csv(*args, **kwargs)).AvgValue"
        f"\n    return read.assign(AvgValue={shift})\n"
        "pd = types.SimpleNamespace(**{**vars(_pd), 'read_csv': _csv})\n"
    )
    findings = recorded.altered(10, change)["findings"]
    assert parse(FILES, findings)[1] == wording, f"with the CSV's AvgValue at {shift}: {findings}"
