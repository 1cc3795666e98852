"""Section 10, what a call leaves: the files and the report of a real Nsight Compute run, read by today's cells."""

import lzma
import os
from pathlib import Path

import evidence
import ncu_report
import pandas as pd
import pytest
from support import ROOT, parse, run_cells, verdicts

RULES = "the softmax's rules that fired: {}; its longest wait: {}"


def test_the_rules_list_and_verdict_name_only_the_rules_that_fired_and_the_longest_stall(tmp_path, monkeypatch):
    found = sorted(ROOT.glob("docs/verified/*/s10_sections/report.ncu-rep.xz"))  # tools/keep_run.py compresses it
    if not found:
        pytest.skip(f"no committed s10_sections/report.ncu-rep.xz: {evidence.RERECORD}")
    (tmp_path / "s10_sections").mkdir()
    (tmp_path / "s10_sections/report.ncu-rep").write_bytes(lzma.decompress(found[-1].read_bytes()))  # s10-profile's
    monkeypatch.chdir(tmp_path)
    namespace = {"pd": pd, "ncu_report": ncu_report, "gpu": "NVIDIA H100 80GB HBM3"}
    printed = run_cells(["s10-rules", "s10-rules-verdict"], namespace)
    launch = namespace["launch"]
    titled = [r["rule_message"]["title"] for r in launch.rule_results_as_dicts() if r["rule_message"]["title"]]
    fired, longest = parse(RULES, verdicts(printed))
    assert titled and fired == "; ".join(titled), f"every rule with a title, and only those: {printed}"
    assert "optional metric" not in printed, "a notice about an optional metric is not a rule that fired"
    assert longest == namespace["stalls"].idxmax() and longest != "selected", "the largest wait, not issuing"


def test_on_a_real_run_the_verdict_checks_the_runs_mean_and_the_reports_first_launch(tmp_path, monkeypatch):
    folder = evidence.run_with("s10_softmax")
    (frame,) = evidence.written(folder, "s10_softmax")
    said = verdicts(evidence.printed(folder, "s10-verdict"))
    files = sorted(path.name for path in (folder / "s10_softmax").iterdir())
    template = "{} files; mean of the runs = AvgValue: {}; report's first launch = run 1: {}"
    assert parse(template, said) == [len(files), "True", "True"], f"{files}: {said}"
    assert frame.NumRuns[0] == 5 and frame.Unit[0] == "ns"


def test_the_files_cell_reads_the_newest_runs_not_an_earlier_sessions_higher_numbered_ones(tmp_path, monkeypatch):
    """nsight numbers a call's files from 0 in each session, and -9 sorts after -10 by name: the newest file is
    this call's, whatever its number."""
    folder = tmp_path / "s10_softmax"
    folder.mkdir()
    for number, values, written_at in [(10, [1.0, 2.0], 2_000), (9, [5.0, 6.0], 1_000), (0, [3.0, 4.0], 3_000)]:
        csv = folder / f"profiled_data-softmax_rows-{number}.csv"
        pd.DataFrame({"Value": values}).to_csv(csv, index=False)
        os.utime(csv, (written_at, written_at))
    monkeypatch.chdir(tmp_path)
    namespace = {"pd": pd, "Path": Path, "os": os}
    run_cells(["s10-files"], namespace)
    assert namespace["per_run"].tolist() == [3.0, 4.0], "s10-files must read the newest profiled_data CSV"
