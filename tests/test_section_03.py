"""Section 3, spread over repeated runs; its extra, the host clock and CUDA events: against the recorded rows."""

import re

import cupti_evidence
import pytest
from pytest import approx

SPREAD = re.compile(r"the shortest add (.+); RSD (.+)$")
ONE_LENGTH = re.compile(r"([\d.]+)% at n=([\d,]+)")
CLOCKS = "host clock {}x and CUDA events {}x nsight's time for the 16M add"
SHORTEST = {True: "spread most", False: "did not spread most"}


def spreads(recorded) -> dict:
    """n -> (mean in us, RSD in %) recomputed from each row's StdDev and AvgValue (ns)."""
    frame = recorded.bound(3)["runs_frame"]
    assert set(frame.Unit) == {"ns"} and set(frame.NumRuns) == {20}, "runs_frame changed"
    return {r.n: (r.AvgValue / 1e3, 100 * r.StdDev / r.AvgValue) for r in frame.itertuples()}


def spread_finding(findings: list[str]) -> tuple[str, dict]:
    (match,) = [m for m in map(SPREAD.match, findings) if m and ONE_LENGTH.search(m.group(2))]
    return match.group(1), {int(n.replace(",", "")): float(rsd) for rsd, n in ONE_LENGTH.findall(match.group(2))}


def test_section_3s_verdict_gives_every_lengths_relative_spread_and_whether_the_shortest_spread_most(recorded):
    mine = spreads(recorded)
    said, shown = spread_finding(recorded.findings(3))
    assert shown == approx({n: rsd for n, (_, rsd) in mine.items()}, abs=0.06), "RSD = 100 StdDev / AvgValue"
    shortest_most = max(mine, key=lambda n: mine[n][1]) == min(mine)
    assert said == SHORTEST[shortest_most], f"{said!r}, yet the RSDs were {shown}"
    assert shortest_most, "the recording no longer shows the shortest kernel spreading most (s3-read says it does)"


def test_section_3s_table_shows_nsights_own_statistics_in_ns_and_its_stability_flag(recorded):
    recorded.section(3)
    table = recorded.value("spread.reset_index().to_dict('records')")
    frame = recorded.bound(3)["runs_frame"]
    assert set(frame.Unit) == {"ns"}, "the table's times are nsight's, in the frame's unit"
    for shown, row in zip(table, frame.itertuples(), strict=True):
        stats = ["AvgValue", "CI95_Lower", "CI95_Upper", "RelativeStdDevPct"]
        assert [shown[name] for name in stats] == approx([getattr(row, name) for name in stats]), "nsight's columns"
        assert row.CI95_Lower < row.AvgValue < row.CI95_Upper, "the interval brackets the mean"
        assert shown["StableMeasurement"] == bool(row.StableMeasurement) == (row.RelativeStdDevPct < 2), "RSD < 2"


@pytest.mark.parametrize("shortest_most", [True, False])
def test_section_3_says_whether_the_shortest_add_spread_most(recorded, shortest_most):
    at = "runs_frame.n.min()" if shortest_most else "runs_frame.n.max()"  # the shortest, or the longest, add
    change = f"runs_frame = runs_frame.copy()\nruns_frame.loc[runs_frame.n == {at}, 'RelativeStdDevPct'] = 1e3"
    said, _ = spread_finding(recorded.altered(3, change)["findings"])
    assert said == SHORTEST[shortest_most], said


def test_section_3s_extra_sets_the_mean_host_and_event_times_against_nsights_16m_add(recorded):
    bound = recorded.bound(3)
    host, events = (sum(bound[name]) / len(bound[name]) for name in ("host_us", "events_us"))
    nsight_us = spreads(recorded)[2**24][0]
    assert recorded.shown(3, CLOCKS) == approx([host / nsight_us, events / nsight_us], abs=0.006), "mean / nsight"
    assert nsight_us < events < host, "the recording no longer shows events and the host clock adding to the kernel"


def test_on_the_cupti_run_section_3s_verdict_gives_the_rsd_of_each_lengths_raw_runs():
    (frame,), (raw,) = (cupti_evidence.written("s3", kind) for kind in ("processed_data", "profiled_data"))
    said, _ = cupti_evidence.findings(3, {"runs_frame": frame}, upto="s3-verdict")  # its extra's timings: not kept
    runs = raw[raw.Metric == "gpu__time_duration.sum"].groupby("n").Value
    rsd = (100 * runs.std() / runs.mean()).to_dict()  # ddof=1, as nsight's StdDev
    word, shown = spread_finding(said)
    assert shown == approx(rsd, abs=0.06), f"RSD from the raw runs: {rsd}"
    assert word == SHORTEST[max(rsd, key=rsd.get) == min(rsd)], f"{word!r} for {rsd}"
