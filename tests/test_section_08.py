"""Section 8, info collectors and thermal pauses, on the recorded per-run CSVs and frames of both calls."""

import numpy as np
import pandas as pd
import pytest
import recordings
from cupti_evidence import CUPTI_RUN
from kernel_session import KernelSession
from pytest import approx
from support import parse

from plumbing.cells import HARNESS

CORRELATION = "time vs temperature r = {} ({} ns/C), vs SM clock r = {}"


def bound(recorded) -> dict:
    return recorded.bound(8)  # off_frame, off_runs (s8-run); auto_frame, auto_runs (s8-pause-run)


def rsd(values) -> float:  # the sample standard deviation over the mean, in %: nsight's RelativeStdDevPct
    return 100 * np.std(values, ddof=1) / np.mean(values)


def test_section_8s_collector_columns_summarise_the_per_run_values_each_collector_returned(recorded):
    runs, frame = bound(recorded)["off_runs"], bound(recorded)["off_frame"]
    assert len(runs) == 30 and runs.driver.nunique() == 1, "30 runs, one driver (a ONCE collector)"
    printed = recorded.section(8)
    for name in ("temperature_c", "sm_mhz"):
        for suffix, expected in (("Min", runs[name].min()), ("Max", runs[name].max()), ("Avg", runs[name].mean())):
            assert frame[f"{name}_{suffix}"].iloc[0] == approx(expected), f"{name}_{suffix} is not its runs' {suffix}"
            assert f"{name}_{suffix}" in printed, f"section 8 must print {name}_{suffix}, a column nsight made"
    assert 20 <= runs.temperature_c.min() <= runs.temperature_c.max() <= 95, "temperatures a GPU reports (C)"
    assert 300 <= runs.sm_mhz.min() <= runs.sm_mhz.max() <= 3000, "SM clocks a GPU runs at (MHz)"


def check_correlation_finding(runs, findings) -> None:
    with_temperature, slope, with_clock = parse(CORRELATION, findings)
    assert with_temperature == approx(np.corrcoef(runs.Value, runs.temperature_c)[0, 1], abs=0.0051)
    assert slope == approx(np.polyfit(runs.temperature_c, runs.Value, 1)[0], abs=0.51), "ns per degree, least squares"
    assert with_clock == approx(np.corrcoef(runs.Value, runs.sm_mhz)[0, 1], abs=0.0051), "r against the SM clock"


def test_section_8s_verdict_gives_the_off_runs_correlations_and_slope_from_the_per_run_csv(recorded):
    check_correlation_finding(bound(recorded)["off_runs"], recorded.findings(8))


def test_section_8s_pause_table_is_each_modes_spread_and_lowest_margin_from_its_runs(recorded):
    values = bound(recorded)
    recorded.section(8)
    table = recorded.value("pauses.to_dict(orient='index')")
    for mode in ("off", "auto"):
        runs = values[f"{mode}_runs"]
        expected = {"RSD %": rsd(runs.Value), "lowest margin (C)": runs.margin_c.min()}
        assert table[mode] == approx(expected, rel=1e-6), f"{mode}: check s8-pause-table's rows against the CSV"
        assert 0 < expected["lowest margin (C)"] < 100, f"{mode}: a margin to T.Limit a GPU reports (C)"


def expected_pause_finding(values) -> str:
    off, auto, count = rsd(values["off_runs"].Value), rsd(values["auto_runs"].Value), len(values["off_runs"])
    noise = ((off**2 + auto**2) / (2 * count)) ** 0.5  # an RSD's sampling error, RSD / sqrt(2n), for each
    steady = "steadier" if off - auto > 2 * noise else "not steadier"
    return f"auto was {steady} than off beyond noise ({noise:.1f} points of RSD)"


def test_section_8s_pause_verdict_weighs_the_two_spreads_against_an_rsds_own_noise(recorded):
    expected = expected_pause_finding(bound(recorded))
    assert expected in recorded.findings(8), f"section 8 should say {expected!r}: {recorded.findings(8)}"


def test_section_8s_pause_verdict_says_steadier_when_auto_spreads_far_less_than_off(recorded):
    change = "auto_frame = auto_frame.assign(RelativeStdDevPct=0.1)"
    findings = recorded.altered(8, change)["findings"]
    assert any(f.startswith("auto was steadier than off beyond noise (") for f in findings), findings
    assert parse(CORRELATION, findings), "the off call's correlations stand beside it"


# The headless CUPTI run (section 8 runs on either backend): its calls' CSVs, written by nsight, stand in for the
# frames, and section 8's analysis cells as they are today run on them in a real kernel.
CSV_OF = {"frame": "processed_data-*.csv", "runs": "profiled_data-*.csv"}  # the frame, and one row a run


def cupti_csvs() -> dict:
    """{off_frame, off_runs, auto_frame, auto_runs: the CSV of the CUPTI run that holds it}."""
    pairs = [(mode, kind) for mode in ("off", "auto") for kind in CSV_OF]
    return {f"{mode}_{kind}": next((CUPTI_RUN / f"s8_{mode}").glob(CSV_OF[kind])) for mode, kind in pairs}


@pytest.fixture(scope="module")
def cupti_values(tmp_path_factory):
    """(the CUPTI run's frames by name, the findings section 8's analysis cells make of them)."""
    csvs, tmp = cupti_csvs(), tmp_path_factory.mktemp("cupti8")
    session = KernelSession(env={"NSPY_TUTORIAL_OUT": str(tmp / "out"), "MPLBACKEND": "Agg"}, cwd=tmp)
    try:
        cells = recordings.load_cells()
        session.run(recordings.cell_source(cells, HARNESS))
        reads = "".join(f"{name} = pd.read_csv({str(path)!r})\n" for name, path in csvs.items())
        session.run("import pandas as pd\n" + reads)
        for _, role, source in recordings.cpu_section_sources(cells, 8):
            if role == "analysis":
                session.run(recordings.without_cell_magic(source))
        yield {name: pd.read_csv(path) for name, path in csvs.items()}, session.value("SECTIONS[8]['findings']")
    finally:
        session.close()


def test_section_8s_verdicts_hold_on_the_cupti_runs_own_csvs(cupti_values):
    values, findings = cupti_values
    check_correlation_finding(values["off_runs"], findings)
    expected = expected_pause_finding(values)
    assert expected in findings, f"on the CUPTI run section 8 should say {expected!r}: {findings}"
