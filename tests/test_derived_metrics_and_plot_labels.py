"""What a recording cannot show a CPU replay: a figure the GPU machine derived (section 5's derive_metric ran there,
so the recorded frame holds its answer, not today's function's) and a plot nsight drew there (section 7's PNG). Here
today's derive function is called on the recorded raw times, and nsight draws today's plot again from the recorded
frame, so that its labels are read from the figure object and compared with the data it plots."""

from __future__ import annotations

import re

from pytest import approx
from recordings import decode

CAPTURE = """
import inspect as _inspect
import matplotlib as _matplotlib
import nsight.visualization as _visualization

_matplotlib.use("Agg")


def _plot_arguments(function):  # what @nsight.analyze.plot was given: its wrapper's closure holds each argument
    code = getattr(function, "__code__", None)
    if not callable(function) or code is None or "plot_type" not in code.co_freevars:
        return None
    given = dict(zip(code.co_freevars, (cell.cell_contents for cell in function.__closure__)))
    accepted = _inspect.signature(_visualization.visualize).parameters
    return {{key: value for key, value in given.items() if key in accepted}} | {{"ylabel": given["ylabel"] or ""}}


_figures = []
for _given in filter(None, map(_plot_arguments, list(globals().values()))):
    _given |= {{"filename": {png!r}, "plot_callback": _figures.append}}
    _visualization.visualize({frame}, **_given)
_labels = [{{"title": f._suptitle.get_text(), "ylabels": [a.get_ylabel() for a in f.axes if a.get_ylabel()]}}
           for f in _figures]
"""


def raw_times(recorded, number: int) -> list[tuple[float, int, str]]:
    """(kernel time in ns, n, annotation) of each run section `number`'s calls recorded on the GPU machine."""
    found = []
    for call in (call for call in recorded.recording["calls"] if call["section"] == number):
        raw = decode(call["raw_frame"])
        times = raw[raw.Metric == "gpu__time_duration.sum"]
        assert set(times.Unit) == {"ns"}, f"section {number}'s raw times are in {set(times.Unit)}, not ns"
        found += [(float(t), int(n), a) for t, n, a in zip(times.Value, times.n, times.Annotation, strict=True)]
    assert found, f"no raw times recorded for section {number}: re-record it (scripts/record_ncu.py)"
    return found


def test_section_5s_derive_function_gives_two_n_cubed_flops_over_each_recorded_time_in_tflops(recorded):
    recorded.section(5)
    frame = recorded.bound(5)["sweep_frame"]
    (derived,) = {metric for metric in frame.Metric if not metric.startswith("gpu__")}  # nsight names it as the def
    runs = raw_times(recorded, 5)
    answers = recorded.value(f"[{derived}(t, n) for t, n in {[(t, n) for t, n, _ in runs]!r}]")
    for (time_ns, n, annotation), (rate, unit) in zip(runs, answers, strict=True):
        flops_per_s = 2 * n**3 / (time_ns * 1e-9)  # a product of two n x n matrices: n^3 multiply-adds
        assert (rate, unit) == (approx(flops_per_s / 1e12, rel=1e-9), "TFLOP/s"), (
            f"{derived}({time_ns}, {n}) for {annotation} gives {rate} {unit}: it must be 2 n^3 FLOPs over the run's "
            "time, in TFLOP/s (fix section 5's derive function, then re-record section 5)"
        )


def plotted_labels(recorded, number: int, frame: str, tmp_path) -> list[dict]:
    """The title and axis labels of each figure nsight draws from `frame` with today's @nsight.analyze.plot
    arguments of section `number`'s plotted functions (read from the decorator's closure, not the notebook's text)."""
    recorded.section(number)
    recorded.session.run(CAPTURE.format(frame=frame, png=str(tmp_path / "replot.png")))
    labels = recorded.value("_labels")
    assert labels, f"section {number} defines no function under @nsight.analyze.plot, or nsight drew no figure"
    return labels


def test_section_7s_plot_labels_name_the_unit_and_the_size_of_the_data_nsight_plots(recorded, tmp_path):
    frame = recorded.bound(7)["fusion_frame"]
    (figure,) = plotted_labels(recorded, 7, "fusion_frame", tmp_path)
    (unit,) = set(frame[frame.Metric == "gpu__time_duration.sum"].Unit)
    (ylabel,) = figure["ylabels"]
    assert re.search(rf"\({re.escape(unit)}\)", ylabel), f"the y axis says {ylabel!r}; the times it plots are in {unit}"
    (n,) = set(frame.n)
    powers = [int(power) for power in re.findall(r"2\^(\d+)", figure["title"])]
    assert powers and all(2**power == n for power in powers), f"the title {figure['title']!r} names another n than {n}"
