"""Section 8, info collectors: today's picture and verdict cells on the runs a real run left."""

import evidence
import matplotlib
import pandas as pd
import pytest
from IPython.display import Image
from pytest import approx
from support import parse, run_cells, verdicts

matplotlib.use("Agg")
HEAT = "time against temperature r = {}, against SM clock r = {} ({}-{} °C, {}-{} MHz)"
PAUSE = "auto took {} s against {} s, RSD {}% against {}%; {}"


def recorded():
    folder = evidence.run_with("s8_off")
    (off,), (auto,) = evidence.written(folder, "s8_off"), evidence.written(folder, "s8_auto")
    (off_runs,), (auto_runs,) = (evidence.written(folder, f"s8_{mode}", "profiled_data") for mode in ("off", "auto"))
    names = {"off": off, "auto": auto, "off_runs": off_runs, "auto_runs": auto_runs, "gpu": evidence.gpu(folder)}
    return names | {"off_seconds": 3.2, "auto_seconds": 3.5, "Image": Image, "pd": pd}  # wall times: not in files


def test_the_verdict_correlates_each_runs_time_with_its_temperature_and_clock_under_a_labelled_picture(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the picture is saved into the working folder
    names = recorded()
    said = verdicts(run_cells(["s8-plot", "s8-verdict"], names))
    axes = names["axes"]
    assert "temperature" in axes.get_title() and "(°C)" in axes.get_xlabel() and "(us)" in axes.get_ylabel()
    assert names["figure"].axes[1].get_ylabel() == "SM clock (MHz)", "the colour bar says what colour means"
    assert "kernel time" in names["chart"] and "temperature" in names["chart"], "alt text for a reader who can't see"
    runs = names["off_runs"]
    r_heat, r_clock, *span = parse(HEAT, said)
    assert [r_heat, r_clock] == [
        approx(runs.Value.corr(runs[column]), abs=0.006) for column in ("temperature_c", "sm_mhz")
    ]
    assert span == [runs.temperature_c.min(), runs.temperature_c.max(), runs.sm_mhz.min(), runs.sm_mhz.max()]
    assert len(runs) == 30 and (tmp_path / "s8_heat.png").stat().st_size > 10_000, "30 runs, drawn"


@pytest.mark.parametrize(
    "lowest, cause",
    [(34, "most likely never paused"), (9, "may be pauses to cool"), (None, "reports no thermal margin")],
)
def test_the_pause_verdict_claims_a_pause_only_where_the_margin_reached_autos_trigger(lowest, cause):
    names = recorded()
    names["auto_runs"]["margin_c"] = lowest  # the margin read as each region started
    said = verdicts(run_cells(["s8-pause-table", "s8-pause-verdict"], names))
    auto_s, off_s, auto_rsd, off_rsd, why = parse(PAUSE, said)
    assert [auto_s, off_s] == [3.5, 3.2], "the wall times the run cells measured"
    assert [auto_rsd, off_rsd] == [approx(names[m].RelativeStdDevPct[0], abs=0.051) for m in ("auto", "off")]
    assert cause in why, f"lowest margin {lowest} °C against auto's 10 °C trigger: {why}"
