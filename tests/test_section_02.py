"""Section 2, one kernel, one row: its verdict and figure against the recorded row, on both backends."""

from pytest import approx

VERDICT = (
    "one 2048 x 2048 fp32 product took {} us ({} TFLOP/s) in kernel {}; with {} run there is no spread (StdDev {})"
)


def test_section_2s_verdict_and_figure_are_the_rows_time_kernel_and_2_n_cubed_flops(recorded):
    row = recorded.bound(2)["first_frame"].iloc[0]
    assert (row.n, row.Unit, row.NumRuns) == (2048, "ns", 1), f"the recorded row changed: {row.to_dict()}"
    tflops = 2 * 2048**3 / (row.AvgValue * 1e-9) / 1e12
    us, rate, kernel, runs, stddev = recorded.shown(2, VERDICT)
    assert (us, rate) == approx((row.AvgValue / 1e3, tflops), abs=0.6), (
        f"section 2 says {us} us and {rate} TFLOP/s; its row's {row.AvgValue} ns for 2 * 2048^3 FLOPs give "
        f"{row.AvgValue / 1e3:.0f} us and {tflops:.1f}: check the ns factors and the FLOP count in s2-verdict"
    )
    assert kernel.removesuffix("...") in row.Kernel and (runs, str(stddev)) == (row.NumRuns, str(row.StdDev)), (
        f"section 2 names kernel {kernel!r}, {runs} run, StdDev {stddev}; its row: {row.Kernel}, {row.NumRuns}, "
        f"{row.StdDev}"
    )
    recorded.check_figure(2, "fp32 product, n=2048", tflops, "TFLOP/s", "fp32_tflops")
