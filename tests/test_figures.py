"""The pictures (plumbing/figures.py): the alt text names every series with its numbers; axes say units."""

import IPython.display
import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
from plumbing import figures  # noqa: E402

PEAKS = {"fp32_tflops": 67.0, "fp16_tflops": 989.0, "dram_gbs": 4800.0}
BOUND = pd.DataFrame({"FLOP/byte": [0.125, 500.0], "TFLOP/s": [0.5, 800.0], "% of roof": [83.0, 81.0]},
                     index=["scaling", "product"])  # fmt: skip
THERMAL = {mode: {"runs": pd.DataFrame({"margin_c": m})} for mode, m in (("off", [20.0, 15.0]), ("auto", [22.0, 21.0]))}
PLOTS = {  # plot: (its call, its x and y labels, what its alt text says of each series)
    "roofline": (lambda: figures.plot_roofline(BOUND, PEAKS, "NVIDIA H200"), None,
        ["scaling: 0.125 FLOP/byte, 0.5 TFLOP/s, 83% of its roof", "product: 500 FLOP/byte, 800 TFLOP/s, 81%"]),
    "thermal": (lambda: figures.plot_thermal(THERMAL, pd.Series({"off": 0, "auto": 2})), ("run", "T.Limit margin (C)"),
        ["off: margin 15-20 C, 0 pauses", "auto: margin 21-22 C, 2 pauses"]),
}  # fmt: skip


@pytest.mark.parametrize("plot", PLOTS)
def test_a_pictures_alt_text_gives_each_series_own_numbers_and_its_axes_their_units(monkeypatch, tmp_path, plot):
    call, labels, series = PLOTS[plot]
    monkeypatch.setattr(figures, "OUT_DIR", tmp_path)  # its PNG goes to a scratch folder
    alts = []
    monkeypatch.setattr(IPython.display, "display", lambda image: alts.append(image.alt))
    drawn = call()
    assert len(alts) == 1 and all(text in alts[0] for text in series), alts
    if labels:
        axes = drawn.axes[0]
        assert (labels[0] or axes.get_xlabel(), labels[1]) == (axes.get_xlabel(), axes.get_ylabel())
