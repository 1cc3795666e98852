"""Section 9, CUPTI beside Nsight Compute: the same benchmark's recorded frames from both backends."""

from pytest import approx
from support import parse

SIZES = (512, 4096)
VERDICT = "CUPTI / Nsight Compute: {}x at n=512, {}x at n=4096"  # kernel time, each size


def times(frame) -> dict:
    """{n: AvgValue in ns} of one backend's frame: one row per size, the fp32 matmul region, in ns."""
    assert sorted(frame.n) == list(SIZES), f"one row per size {SIZES}: {list(frame.n)}"
    assert set(frame.Annotation) == {"fp32 matmul"} and set(frame.Unit) == {"ns"}, "the region and its unit"
    return dict(zip(frame.n, frame.AvgValue, strict=True))


def test_section_9s_verdict_is_each_sizes_cupti_time_over_nsight_computes_from_the_two_frames(recorded):
    values = recorded.bound(9)  # ncu_frame (s9-ncu), cupti_frame (the child's CSV, s9-cupti)
    ncu, cupti = times(values["ncu_frame"]), times(values["cupti_frame"])
    shown = recorded.shown(9, VERDICT)
    assert shown == approx([cupti[n] / ncu[n] for n in SIZES], abs=0.0051), "CUPTI's AvgValue over Nsight Compute's"


def test_section_9s_two_backends_timed_the_same_kernel_within_physical_bounds(recorded):
    values = recorded.bound(9)
    ncu, cupti = times(values["ncu_frame"]), times(values["cupti_frame"])
    for n in SIZES:
        assert 0.5 < cupti[n] / ncu[n] < 1.2, f"n={n}: one fp32 product, two clocks on it, {cupti[n]} against {ncu[n]}"
        assert 2 * n**3 / ncu[n] / 1e3 < recorded.peaks()["fp32_tflops"] * 1.5, f"n={n}: faster than the datasheet"


def test_section_9s_verdict_follows_the_frames_when_cupti_is_the_slower(recorded):
    findings = recorded.altered(9, "cupti_frame = cupti_frame.assign(AvgValue=2 * ncu_frame.AvgValue.values)")
    assert parse(VERDICT, findings["findings"]) == [2.0, 2.0], findings
