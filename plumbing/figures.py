"""The pictures of sections 6 and 8 from their tables: each saved under OUT_DIR, shown with alt text that
gives the data in words, and returned for the tests. Section 7 uses nsight's own @nsight.analyze.plot."""

import matplotlib.pyplot as plt

from plumbing.harness import OUT_DIR

BUSY_SHARE = 0.6  # Nsight Compute's SpeedOfLight line: under 60% of its roof, a kernel is held by neither roof


def _show(figure, name, alt):
    """Save the figure as OUT_DIR/<name>.png, close it, and display the file with its alt text (IPython only)."""
    figure.savefig(OUT_DIR / f"{name}.png", bbox_inches="tight")
    plt.close(figure)
    try:
        from IPython.display import Image, display
    except ImportError:  # a plain Python running the cells: the file is written, nothing to show
        return figure
    display(Image(OUT_DIR / f"{name}.png", alt=alt))
    return figure


def plot_roofline(bound, peaks, gpu):
    """Section 6: the fp16 and fp32 roofs over the bandwidth roof, their 60% lines, and one point per kernel."""
    intensities = [10 ** (step / 10) for step in range(-20, 41)]  # 0.01 to 10,000 FLOP per byte
    figure, axes = plt.subplots(figsize=(7.5, 4.8))
    for key, color, name in (("fp16_tflops", "tab:orange", "fp16 tensor"), ("fp32_tflops", "tab:blue", "fp32")):
        roofs = [min(peaks[key], intensity * peaks["dram_gbs"] / 1e3) for intensity in intensities]
        axes.plot(intensities, roofs, color=color, label=f"{name} roof, {peaks[key]:g} TFLOP/s")
        axes.plot(intensities, [BUSY_SHARE * r for r in roofs], ":", color=color, label=f"{BUSY_SHARE:.0%} of it")
    said = []
    for kernel, row in bound.iterrows():
        axes.plot(row["FLOP/byte"], row["TFLOP/s"], "o", color="black")
        share = f"{row['% of roof']:.0f}% of its roof"
        axes.annotate(
            f"{kernel}: {share}", (row["FLOP/byte"], row["TFLOP/s"]), xytext=(6, -12), textcoords="offset points"
        )
        said.append(f"{kernel}: {row['FLOP/byte']:.3g} FLOP/byte, {row['TFLOP/s']:.3g} TFLOP/s, {share}")
    axes.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte it must move)")
    axes.set(ylabel="achieved throughput (TFLOP/s)", title=f"Roofline, {gpu}: each kernel against the roof above it")
    axes.legend(fontsize=7, loc="lower right")
    alt = f"Log-log roofline with the fp16 and fp32 roofs and their 60% lines. {'; '.join(said)}"
    return _show(figure, "s6_roofline", alt)


def plot_thermal(thermal, pauses):
    """Section 8: each run's T.Limit margin, one line per thermal_mode, against auto's 10 C pause line; `pauses`
    holds each mode's count of runs that started after a thermal pause."""
    figure, axes = plt.subplots(figsize=(8, 3.5))
    for mode, result in thermal.items():
        margins = result["runs"].margin_c
        axes.plot(range(1, len(margins) + 1), margins, ".-", label=f"thermal_mode={mode!r}: {pauses[mode]} pauses")
    axes.axhline(10, color="gray", linestyle=":", label="auto pauses at 10 C")
    axes.set(xlabel="run", ylabel="T.Limit margin (C)", title="Degrees left before the GPU throttles, run by run")
    axes.legend(fontsize=8)
    said = [f"{mode}: margin {r['runs'].margin_c.min():.0f}-{r['runs'].margin_c.max():.0f} C, {pauses[mode]} pauses"
            for mode, r in thermal.items()]  # fmt: skip
    return _show(figure, "s8_runs", f"Lines of the thermal margin against run number. {'; '.join(said)}")
