"""Section 10, what a call leaves on disk, against the files and reports the ncu recordings hold."""

import re
from pathlib import Path

import ncu_report
import pandas as pd
from pytest import approx
from support import TO_BASE, parse

TIME = "gpu__time_duration.sum"
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")
FILES = "{} files; mean of runs = AvgValue: {}; launch 1 = run 1: {}"
THROUGHPUT = "compute {}%, memory {}% of peak"  # a line s10-rules prints
RULES = "Latency Issue fired: {}"
EVIDENCE = (r".*\.ncu-rep", r".*\.log", r"profiled_data-.*\.csv", r"processed_data-.*\.csv")  # no collector: no pickle
PEAK = ".avg.pct_of_peak_sustained_elapsed"


def first_launch(path: Path):
    return ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)


def test_section_10s_files_verdict_counts_the_calls_files_and_checks_the_csv_against_frame_and_report(recorded):
    recorded.section(10)
    folder = recorded.out / "s10_softmax"
    files = sorted(path.name for path in folder.iterdir())
    assert [sum(bool(re.fullmatch(p, name)) for name in files) for p in EVIDENCE] == [1] * 4 and len(files) == 4, (
        f"a call with output_csv and no info collector leaves a report, a log and two CSVs: {files}"
    )
    per_run = pd.read_csv(next(folder.glob("profiled_data-*.csv")))
    frame = recorded.bound(10)["softmax_frame"]
    launch = first_launch(next(folder.glob("*.ncu-rep")))[TIME]
    first_ns = launch.value() * TO_BASE[launch.unit()] / 1e-9
    count, mean_is, first_is = recorded.shown(10, FILES)
    assert count == len(files) and len(per_run) == 5, "the folder's files; five runs in the per-run CSV"
    mean_matches = per_run.Value.mean() == approx(frame.AvgValue.iloc[0], rel=1e-9)
    assert (mean_is, first_is) == (str(mean_matches), str(first_ns == approx(per_run.Value.iloc[0], rel=1e-6)))
    assert mean_is == first_is == "True", "nsight's AvgValue is its runs' mean, and its report holds those runs"


def test_section_10s_files_verdict_says_false_when_the_frames_mean_is_not_the_runs(recorded):
    change = "softmax_frame = softmax_frame.assign(AvgValue=softmax_frame.AvgValue * (1 + 1e-6))"
    findings = recorded.altered(10, change)["findings"]
    assert parse(FILES, findings)[1] == "False", f"a frame 1 ppm off its runs' mean: {findings}"


def test_section_10s_rules_cells_print_the_reports_throughputs_and_say_whether_its_latency_rule_fired(recorded):
    printed = recorded.section(10).splitlines()
    launch = first_launch(recorded.out / "s10_sections" / "report.ncu-rep")
    compute, memory = (launch[name + PEAK].value() for name in ("sm__throughput", "gpu__compute_memory_throughput"))
    assert parse(THROUGHPUT, printed) == [approx(compute, abs=0.51), approx(memory, abs=0.51)], "from its report"
    titles = [rule["rule_message"]["title"] for rule in launch.rule_results_as_dicts()]
    assert ("SpeedOfLight: Latency Issue" in printed) == ("Latency Issue" in titles), "the rules that fired, by title"
    assert recorded.shown(10, RULES) == [str("Latency Issue" in titles)], "the verdict: whether the rule fired"
    assert ("Latency Issue" in titles) == (max(compute, memory) < 60), "the rule fires when both stay under 60%"


def test_section_10s_stall_table_is_the_reports_four_largest_reasons_without_selected(recorded):
    recorded.section(10)
    launch = first_launch(recorded.out / "s10_sections" / "report.ncu-rep")
    waits = {m[1]: launch[m[0]].value() for m in map(STALL.fullmatch, launch.metric_names()) if m}
    expected = pd.Series(waits).drop("selected").nlargest(4).to_dict()
    assert recorded.value("stalls.nlargest(4).to_dict()") == approx(expected), "the report's largest stall reasons"
    assert (
        "long_scoreboard" in waits
        and 0 < sum(expected.values()) < launch["smsp__average_warp_latency_per_inst_issued.ratio"].value()
    ), "the waits are part of a warp's cycles per issued instruction"
