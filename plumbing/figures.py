"""The pictures of sections 3, 5, 6 and 8, drawn from the tables the sections' visible cells built.

Each function saves its picture under OUT_DIR, shows it with alt text that gives the data in words (for a screen
reader and the rendered page) and returns the figure, so that a test can read what was drawn. Section 7 draws its
bars with nsight's own @nsight.analyze.plot.
"""

from plumbing.harness import OUT_DIR

BUSY_SHARE = 0.6  # Nsight Compute's SpeedOfLight line: under 60% of its roof, a kernel is held by neither roof


def _show(figure, name, alt):
    """Save the figure as OUT_DIR/<name>.png, close it, and display the file with its alt text."""
    import matplotlib.pyplot as plt

    try:
        from IPython.display import Image, display
    except ImportError:  # a plain Python running the cells: the file is written, nothing to show
        Image = display = None
    path = OUT_DIR / f"{name}.png"
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    if display is not None:
        display(Image(path, alt=alt))
    return figure


def plot_run_spread(per_run):
    """Section 3: every run's kernel time, one column per (region, n), labelled with its relative spread."""
    import matplotlib.pyplot as plt

    groups = list(per_run.groupby(["Annotation", "n"], sort=False))
    figure, axes = plt.subplots(figsize=(8, 3.5))
    spreads = []
    for position, ((region, n), runs) in enumerate(groups):
        axes.plot([position] * len(runs), runs.Value / 1e3, "o", alpha=0.5)
        spread = f"{runs.Value.std() / runs.Value.mean():.1%}"
        spreads.append(f"{region} at n={n:,}: {len(runs)} runs, spread {spread}")
        axes.annotate(spread, (position, runs.Value.max() / 1e3), xytext=(0, 8), textcoords="offset points")
    axes.set_xticks(range(len(groups)), [f"{region}\nn={n:,}" for (region, n), _ in groups], fontsize=8)
    axes.set(yscale="log", ylabel="kernel time of each run (us)")
    axes.set_title("The shortest kernel scatters most: every run's time, labelled with its spread (std / mean)")
    return _show(figure, "s3_runs", "Dots on a log time axis, one column per region and size. " + "; ".join(spreads))


def plot_sweep(tflops_table, peaks, peaks_label):
    """Section 5: TFLOP/s by matrix size, one line per precision, with its datasheet peak dashed where known."""
    import matplotlib.pyplot as plt

    sizes = list(tflops_table.index)
    figure, axes = plt.subplots(figsize=(7, 4))
    for precision, key, color in (("float32", "fp32_tflops", "tab:blue"), ("float16", "fp16_tflops", "tab:orange")):
        axes.plot(sizes, tflops_table[precision], "o-", color=color, label=f"{precision}, measured")
        if peaks:
            axes.axhline(peaks[key], color=color, linestyle="--", label=f"{precision} peak ({peaks_label} datasheet)")
    axes.set(xscale="log", yscale="log", xlabel="matrix size n (n x n)", ylabel="throughput (TFLOP/s)")
    axes.set_xticks(sizes, [str(n) for n in sizes])
    axes.minorticks_off()
    axes.set_title("Throughput grows with matrix size; float16 on tensor cores pulls away")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    lines = "; ".join(
        f"{precision}: " + ", ".join(f"n={n} {tflops_table.loc[n, precision]:.1f}" for n in sizes)
        for precision in ("float32", "float16")
    )
    return _show(figure, "s5_sweep", f"Log-log lines of TFLOP/s against matrix size. {lines}")


def plot_roofline(bound, peaks, gpu):
    """Section 6: the fp16 and fp32 roofs over the bandwidth roof, their 60% lines, and one point per kernel."""
    import matplotlib.pyplot as plt

    intensities = [10 ** (step / 10) for step in range(-20, 41)]  # 0.01 to 10,000 FLOP per byte
    figure, axes = plt.subplots(figsize=(7.5, 4.8))
    for key, color, name in (("fp16_tflops", "tab:orange", "fp16 tensor"), ("fp32_tflops", "tab:blue", "fp32")):
        roofs = [min(peaks[key], intensity * peaks["dram_gbs"] / 1e3) for intensity in intensities]
        axes.plot(intensities, roofs, color=color, label=f"{name} roof, {peaks[key]:g} TFLOP/s")
        axes.plot(intensities, [BUSY_SHARE * r for r in roofs], ":", color=color, label=f"{BUSY_SHARE:.0%} of it")
    for kernel, row in bound.iterrows():
        point = (row["FLOP/byte"], row["TFLOP/s"])
        axes.plot(*point, "o", color="black")
        axes.annotate(
            f"{kernel}: {row['% of roof']:.0f}% of its roof", point, xytext=(6, -12), textcoords="offset points"
        )
    axes.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte it must move)")
    axes.set(ylabel="achieved throughput (TFLOP/s)")
    axes.set_title(f"Roofline, {gpu}: each kernel against the roof above it")
    axes.legend(fontsize=7, loc="lower right")
    points = "; ".join(
        f"{kernel}: {row['FLOP/byte']:.3g} FLOP/byte, {row['TFLOP/s']:.3g} TFLOP/s, {row['% of roof']:.0f}% of its roof"
        for kernel, row in bound.iterrows()
    )
    return _show(figure, "s6_roofline", f"Log-log roofline with the fp16 and fp32 roofs and their 60% lines. {points}")


def plot_thermal(thermal, pauses):
    """Section 8: per run, the kernel time, the SM clock and the T.Limit margin, one line per thermal_mode; `pauses`
    holds each mode's count of runs that started after a thermal pause."""
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    for (mode, result), color in zip(thermal.items(), ("tab:blue", "tab:red", "tab:green"), strict=False):
        runs, number = result["runs"], range(1, len(result["runs"]) + 1)
        for axes, values in zip(panels, (runs.Value / 1e3, runs.sm_mhz, runs.margin_c), strict=True):
            axes.plot(number, values, ".-", color=color, label=f"thermal_mode={mode!r}")
    panels[0].set(ylabel="kernel time (us)")
    panels[0].set_title("Each run after the load: kernel time, SM clock and thermal margin by thermal_mode")
    panels[1].set(ylabel="SM clock (MHz)")
    panels[2].set(xlabel="run", ylabel="T.Limit margin (C)")
    panels[2].axhline(10, color="gray", linestyle=":", label="auto pauses at 10 C")
    panels[0].legend(fontsize=8)
    panels[2].legend(fontsize=8)
    per_mode = "; ".join(
        f"{mode}: {r['runs'].Value.min() / 1e3:.0f}-{r['runs'].Value.max() / 1e3:.0f} us, SM clock "
        f"{r['runs'].sm_mhz.min():.0f}-{r['runs'].sm_mhz.max():.0f} MHz, "
        f"margin down to {r['runs'].margin_c.min():.0f} C, {pauses[mode]} pauses"
        for mode, r in thermal.items()
    )
    return _show(figure, "s8_runs", f"Three panels against run number: time, SM clock, margin. {per_mode}")
