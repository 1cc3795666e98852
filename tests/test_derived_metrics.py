"""What a recording cannot show a CPU replay: a figure the GPU machine derived (section 5's derive_metric ran there,
so the recorded frame holds its answer, not today's function's). Here today's derive function is called on the
recorded raw times and compared with the FLOPs a product of two n x n matrices takes."""

from __future__ import annotations

from pytest import approx
from recordings import decode


def raw_times(recorded, number: int) -> list[tuple[float, int, str]]:
    """(kernel time in ns, n, annotation) of each run section `number`'s calls recorded on the GPU machine."""
    found = []
    for call in (call for call in recorded.recording["calls"] if call["section"] == number):
        raw = decode(call["raw_frame"])
        times = raw[raw.Metric == "gpu__time_duration.sum"]
        assert set(times.Unit) == {"ns"}, f"section {number}'s raw times are in {set(times.Unit)}, not ns"
        found += [(float(t), int(n), a) for t, n, a in zip(times.Value, times.n, times.Annotation, strict=True)]
    assert found, f"no raw times recorded for section {number}: re-record it (recording/record_ncu.py)"
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
