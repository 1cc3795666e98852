"""The pictures (plumbing/figures.py): the alt text names every series with its numbers; axes say units."""

import IPython.display
import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
from plumbing import figures  # noqa: E402

PEAKS = {"fp32_tflops": 67.0, "fp16_tflops": 989.0, "dram_gbs": 4800.0}


@pytest.fixture
def shown(monkeypatch, tmp_path):
    """The alt text of every picture a plot function displays (it writes its PNG into a scratch OUT_DIR)."""
    monkeypatch.setattr(figures, "OUT_DIR", tmp_path)
    alts = []
    monkeypatch.setattr(IPython.display, "display", lambda image: alts.append(image.alt))
    return alts


def test_the_sweeps_alt_text_gives_each_precisions_rate_at_each_size(shown):
    table = pd.DataFrame({"float32": [10.0, 40.0], "float16": [90.0, 700.0]}, index=pd.Index([512, 4096], name="n"))
    axes = figures.plot_sweep(table, PEAKS, "H200 SXM").axes[0]
    assert "float32: n=512 10.0, n=4096 40.0" in shown[0] and "float16: n=512 90.0, n=4096 700.0" in shown[0], shown
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("matrix size n (n x n)", "throughput (TFLOP/s)")


def test_the_run_spread_alt_text_gives_each_regions_runs_and_spread(shown):
    runs = pd.DataFrame({"Annotation": ["u + v"] * 2 + ["m @ m"] * 2, "n": [16, 16, 16, 16],
                         "Value": [1000.0, 3000.0, 5000.0, 5000.0]})  # fmt: skip
    axes = figures.plot_run_spread(runs).axes[0]
    assert "u + v at n=16: 2 runs, spread 70.7%" in shown[0] and "m @ m at n=16: 2 runs, spread 0.0%" in shown[0]
    assert axes.get_ylabel() == "kernel time of each run (us)"


def test_the_roofline_alt_text_places_each_kernel_by_its_own_row(shown):
    bound = pd.DataFrame({"FLOP/byte": [0.125, 500.0], "TFLOP/s": [0.5, 800.0], "% of roof": [83.0, 81.0]},
                         index=["scaling", "product"])  # fmt: skip
    figures.plot_roofline(bound, PEAKS, "NVIDIA H200")
    assert "scaling: 0.125 FLOP/byte, 0.5 TFLOP/s, 83% of its roof" in shown[0], shown
    assert "product: 500 FLOP/byte, 800 TFLOP/s, 81% of its roof" in shown[0], shown


def test_the_thermal_alt_text_gives_each_modes_margins_and_pauses(shown):
    thermal = {mode: {"runs": pd.DataFrame({"margin_c": margins})} for mode, margins in
               (("off", [20.0, 15.0]), ("auto", [22.0, 21.0]))}  # fmt: skip
    axes = figures.plot_thermal(thermal, pd.Series({"off": 0, "auto": 2})).axes[0]
    assert "off: margin 15-20 C, 0 pauses" in shown[0] and "auto: margin 21-22 C, 2 pauses" in shown[0], shown
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("run", "T.Limit margin (C)")
