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
    assert (us, rate) == approx((row.AvgValue / 1e3, tflops), abs=0.6), "check the ns factors and the 2 n^3 FLOPs"
    assert kernel.removesuffix("...") in row.Kernel and (runs, str(stddev)) == (row.NumRuns, str(row.StdDev)), (
        "the verdict's kernel, runs and StdDev must be its row's"
    )
    recorded.check_figure(2, "fp32 product, n=2048", tflops, "TFLOP/s", "fp32_tflops")
