"""What each section shows: its plot and its headline, built from the section's own tables.

Plots: a learner reads the tables; the pictures only repeat them. So the matplotlib code lives here, folded into the
harness cell, and each section's visible cell is one call that names the table it draws. Each plot function saves
the picture under OUT_DIR, shows it with its alt text (the data in words, for a screen reader and for the rendered
page) and returns the figure, so that a test can read what was drawn.

Headlines (sections 4, 7 and 8): pure functions that take what the section's visible cells built and return
(figure value, headline text). The folded -record cell of the section records the figure (harness.record_figure)
and sets the headline; the committed recordings under docs/verified/ hold both, as the recorded runs printed them.
"""

from plumbing.harness import OUT_DIR

FIGURE_HELPERS = ("plot_run_spread", "plot_cache_and_clock", "plot_sweep", "plot_roofline", "plot_fusion",
                  "plot_thermal", "plot_cupti_ncu")  # fmt: skip


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


def plot_run_spread(per_run, describe):
    """Section 3: every run's kernel time, one column per (region, n), labelled with its spread (std / mean)."""
    import matplotlib.pyplot as plt

    groups = list(per_run.groupby(["Annotation", "n"], sort=False))
    figure, axes = plt.subplots(figsize=(8, 3.5))
    spreads = []
    for position, ((region, n), runs) in enumerate(groups):
        offsets = [position + 0.3 * (i / max(len(runs) - 1, 1) - 0.5) for i in range(len(runs))]
        axes.plot(offsets, runs.Value / 1e3, "o", alpha=0.6)
        spread = f"spread {runs.Value.std() / runs.Value.mean():.1%}"
        spreads.append(f"{describe(region, n)}: {len(runs)} runs, {spread}")
        axes.annotate(
            spread, (position, runs.Value.max() / 1e3), xytext=(0, 8), textcoords="offset points", ha="center"
        )
    labels = [describe(region, n).replace(", ", "\n").replace(" (", "\n(") for (region, n), _ in groups]
    axes.set_xticks(range(len(groups)), labels, fontsize=8)
    axes.set(yscale="log", ylim=(per_run.Value.min() / 2e3, per_run.Value.max() * 5e-3))
    axes.set(ylabel="kernel time, each run (us)")
    axes.set_title("Every run's kernel time, one column per region; the label is its spread (std / mean)")
    alt = "Dots, log time axis: the kernel time of every run, one column per region. " + "; ".join(spreads)
    return _show(figure, "s3_runs", alt)


def plot_cache_and_clock(clock_table):
    """Section 4: kernel time and measured SM clock for each cache and clock setting, one column per input size."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(9, 5), sharex=True)
    for column, (size, group) in enumerate(clock_table.groupby("input (MiB)")):
        labels = [f"cache={c}\nclock={k}" for c, k in zip(group.cache, group.clock, strict=True)]
        axes[0, column].bar(labels, group["time (us)"], color="tab:blue")
        axes[0, column].set(title=f"input {size:,.0f} MiB", ylabel="kernel time (us)")
        axes[1, column].bar(labels, group["SM clock (MHz)"], color="tab:orange")
        axes[1, column].set(ylabel="measured SM clock (MHz)")
        axes[1, column].tick_params(axis="x", labelsize=8)
    figure.suptitle("Kernel time (top) and measured SM clock (bottom) for each cache and clock setting")
    figure.tight_layout()
    bars = "; ".join(
        f"{row['input (MiB)']:,.0f} MiB, cache={row.cache}, clock={row.clock}: {row['time (us)']:.1f} us at "
        f"{row['SM clock (MHz)']:,.0f} MHz"
        for _, row in clock_table.iterrows()
    )
    return _show(figure, "s4_cache_clock", f"Bar charts, one column per input size. {bars}")


def plot_sweep(tflops_table, peak_keys, peaks, peaks_label):
    """Section 5: TFLOP/s by matrix size, one line per region (column), against its datasheet peak.

    peak_keys maps each column to its key in peaks; peaks is None when the GPU is not in the datasheet table.
    """
    import matplotlib.pyplot as plt

    sizes = list(tflops_table.index)
    figure, axes = plt.subplots(figsize=(7, 4))
    for (region, key), color in zip(peak_keys.items(), ("tab:blue", "tab:orange"), strict=False):
        axes.plot(sizes, tflops_table[region], "o-", color=color, label=f"{region} measured")
        if peaks:
            axes.axhline(peaks[key], color=color, linestyle="--", label=f"{region} peak, {peaks_label} datasheet")
    axes.set(xscale="log", yscale="log", xlabel="matrix size n (n x n)", ylabel="throughput (TFLOP/s)")
    axes.set_title("Matmul throughput by size and precision, against the datasheet peaks (dashed, where known)")
    axes.set_xticks(sizes, [str(n) for n in sizes])
    axes.minorticks_off()
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))  # outside the axes: it hides no point
    lines = "; ".join(
        f"{region} at n = " + ", ".join(f"{n}: {tflops_table.loc[n, region]:.1f}" for n in sizes)
        for region in peak_keys
    )
    known = "; datasheet peaks " + ", ".join(f"{peaks[key]:g}" for key in peak_keys.values()) if peaks else ""
    return _show(figure, "s5_sweep", f"Log-log lines of TFLOP/s against matrix size. {lines}{known}")


def plot_roofline(limits_table, peaks, gpu, roof_tflops, ridge_point, busy):
    """Section 6: the two compute roofs over the bandwidth roof, their ridges, the `busy` lines, one point a kernel.

    roof_tflops(intensity, key) and ridge_point(key) are the section's own functions, so the chart draws exactly
    the roofs that its verdicts use.
    """
    import matplotlib.pyplot as plt

    intensities = [10 ** (step / 10) for step in range(-20, 41)]  # 0.01 to 10,000 FLOP per byte
    figure, axes = plt.subplots(figsize=(7.5, 4.8))
    for key, color, name in (("fp16_tflops", "tab:orange", "fp16 tensor"), ("fp32_tflops", "tab:blue", "fp32")):
        roofs = [roof_tflops(intensity, key) for intensity in intensities]
        axes.plot(intensities, roofs, color=color, label=f"{name} roof, {peaks[key]:g} TFLOP/s")
        axes.plot(intensities, [busy * r for r in roofs], ":", color=color, label=f"{busy:.0%} of the {name} roof")
        ridge = (ridge_point(key), peaks[key])
        axes.plot(*ridge, "D", color=color)
        axes.annotate(f"ridge: {ridge[0]:.0f} FLOP/byte", ridge, xytext=(-8, 6), textcoords="offset points", ha="right")
    for kernel, row in limits_table.iterrows():
        side = -1 if row["FLOP/byte"] > ridge_point("fp32_tflops") else 1  # right of the ridge: label to the left
        point = (row["FLOP/byte"], row["TFLOP/s"])
        axes.plot(*point, "o", color="black")
        label = f"{kernel}: {row['% of roof']:.0f}% of its roof"
        axes.annotate(
            label, point, xytext=(8 * side, -14), textcoords="offset points", ha="left" if side > 0 else "right"
        )
    axes.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte it must move)")
    axes.set(ylabel="achieved throughput (TFLOP/s)")
    axes.set_title(f"Roofline, {gpu}: how close each kernel gets to the roof above it")
    axes.legend(fontsize=7, loc="lower right")
    points = "; ".join(
        f"{kernel}: {row['FLOP/byte']:.3g} FLOP/byte, {row['TFLOP/s']:.3g} TFLOP/s, {row['% of roof']:.0f}% of its roof"
        for kernel, row in limits_table.iterrows()
    )
    alt = f"Log-log roofline: fp16 tensor and fp32 roofs over the DRAM bandwidth roof, ridges, dotted {busy:.0%} lines."
    return _show(figure, "s6_roofline", f"{alt} {points}")


def plot_fusion(fusion_table, byte_columns):
    """Section 7: the DRAM bytes of each version beside what it must move, and its kernel time."""
    import matplotlib.pyplot as plt

    figure, (bytes_axes, time_axes) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 1]})
    colors = ["tab:blue", "lightsteelblue", "tab:orange", "tab:red", "navajowhite", "tab:purple"]
    fusion_table[byte_columns].plot.bar(ax=bytes_axes, rot=0, color=colors[: len(byte_columns)])
    bytes_axes.set(xlabel="", ylabel="traffic (MB)", title="Bytes measured per version, beside what it must move")
    bytes_axes.legend(fontsize=8)
    fusion_table["time (us)"].plot.bar(ax=time_axes, rot=0, color="tab:green")
    time_axes.set(xlabel="", ylabel="kernel time (us)", title="Kernel time per version")
    time_axes.tick_params(axis="x", labelsize=8)
    figure.tight_layout()
    bars = "; ".join(
        f"{version}: {row['time (us)']:.0f} us, " + ", ".join(f"{column} {row[column]:,.0f}" for column in byte_columns)
        for version, row in fusion_table.iterrows()
    )
    return _show(figure, "s7_fusion", f"Grouped bars of traffic, and bars of kernel time. {bars}")


def plot_thermal(thermal, paused_before):
    """Section 8: per run, the kernel time, the SM clock, the temperature and the T.Limit margin, for each mode.

    A vertical line marks a run that started after a pause; a dotted line the margin at which a mode pauses.
    """
    import matplotlib.pyplot as plt

    figure, (time_axes, clock_axes, heat_axes) = plt.subplots(3, 1, figsize=(8, 7.5), sharex=True)
    for (mode, result), color in zip(thermal.items(), ("tab:blue", "tab:red", "tab:green"), strict=False):
        runs = result["runs"]
        number = range(1, len(runs) + 1)
        time_axes.plot(number, runs.Value / 1e3, ".-", color=color, label=f"thermal_mode={mode!r}")
        clock_axes.plot(number, runs.sm_mhz, ".-", color=color, label=f"thermal_mode={mode!r}")
        heat_axes.plot(number, runs.temperature_c, ".-", color=color, label=f"temperature ({mode})")
        heat_axes.plot(number, runs.margin_c, "x--", color=color, label=f"T.Limit margin ({mode})")
        for run in [number[i] for i in range(len(runs)) if paused_before(runs).iloc[i]]:
            for axes in (time_axes, clock_axes, heat_axes):
                axes.axvline(run, color=color, alpha=0.3)
        wait = result.get("thresholds", {}).get("thermal_wait")
        if wait is not None:
            heat_axes.axhline(wait, color=color, linestyle=":", label=f"{mode} pauses at a margin of {wait} C")
    time_axes.set(ylabel="kernel time (us)", title="Per run, after the load: the SM clock, the heat, the kernel time")
    clock_axes.set(ylabel="SM clock (MHz)")
    heat_axes.set(xlabel="run (a vertical line: a pause came before it)", ylabel="degrees C")
    time_axes.legend(fontsize=8)
    heat_axes.legend(fontsize=7, ncol=3)
    per_mode = "; ".join(
        f"{mode}: {r.Value.min() / 1e3:.0f}-{r.Value.max() / 1e3:.0f} us, "
        f"SM clock {r.sm_mhz.min():.0f}-{r.sm_mhz.max():.0f} MHz, up to {r.temperature_c.max():.0f} C, "
        f"margin down to {r.margin_c.min():.0f} C, {int(paused_before(r).sum())} pauses"
        for mode, r in ((mode, result["runs"]) for mode, result in thermal.items())
    )
    return _show(figure, "s8_runs", f"Three panels against run number: time, SM clock, heat. {per_mode}")


def plot_cupti_ncu(comparison):
    """Section 9: product time by size under CUPTI and, where the table has it, under Nsight Compute."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.8))
    width, positions = 0.4, range(len(comparison))
    both = "ncu (us)" in comparison
    axes.bar([p - width / 2 * both for p in positions], comparison["CUPTI (us)"], width, label="CUPTI")
    if both:
        axes.bar([p + width / 2 for p in positions], comparison["ncu (us)"], width, label="Nsight Compute")
    tools = "CUPTI beside Nsight Compute" if both else "CUPTI only (no Nsight Compute in this run)"
    axes.set_title(f"fp32 product time by size: {tools}")
    axes.set_xticks(list(positions), [str(n) for n in comparison.index])
    axes.set(yscale="log", xlabel="matrix size n", ylabel="fp32 product time (us)")
    axes.legend()
    times = comparison[[column for column in comparison if column.endswith("(us)")]]
    bars = "; ".join(f"n={n}: " + ", ".join(f"{k} {v:,.1f}" for k, v in row.items()) for n, row in times.iterrows())
    return _show(figure, "s9_cupti_ncu", f"Bars of product time, log scale, per matrix size. {bars}")


def doubling_headline(clock_table):
    """Section 4: (GB/s of the large input with cold caches at boost clocks, the headline).

    The headline compares the small input's time flushed, unflushed and flushed at base clock, and names the memory
    clock the large input ran at with clocks unlocked.
    """
    by_setting = clock_table.set_index(["cache", "clock", "input (MiB)"])
    small, large = sorted(clock_table["input (MiB)"].unique())
    large_gbs = by_setting.loc[("all", "none", large), "GB/s"]
    cold, warm, base = (
        by_setting.loc[(cache, clock, small), "time (us)"]
        for cache, clock in [("all", "none"), ("none", "none"), ("all", "base")]
    )
    memory_mhz = by_setting.loc[("all", "none", large), "memory clock (MHz)"]
    headline = (
        f"small input {cold:.1f} us flushed, {warm:.1f} us unflushed, {base:.1f} us flushed at base clock;"
        f" memory clock {memory_mhz:,.0f} MHz unlocked"
    )
    return large_gbs, headline


def fusion_headline(fusion_table):
    """Section 7: (addcmul's DRAM bandwidth in GB/s, the headline).

    The headline gives how many times fewer bytes the fused kernel moves and how much sooner it ends, how far the
    flushed writes fall short of what must be written, and how close the unflushed writes come to it.
    """
    two, one = fusion_table.loc["multiply, then add"], fusion_table.loc["addcmul"]
    traffic_ratio = (two["read (MB)"] + two["written (MB)"]) / (one["read (MB)"] + one["written (MB)"])
    fused_gbs = (one["read (MB)"] + one["written (MB)"]) * 1e6 / (one["time (us)"] * 1e3)
    speed_ratio = two["time (us)"] / one["time (us)"]
    shortfall = (fusion_table["must write (MB)"] - fusion_table["written (MB)"]).max()
    unflushed_gap = (fusion_table["written, no flush (MB)"] / fusion_table["must write (MB)"] - 1).abs().max()
    headline = (
        f"addcmul moves {traffic_ratio:.2f}x fewer DRAM bytes and runs {speed_ratio:.2f}x sooner; writes short by up"
        f" to {shortfall:.1f} MB with the flush, within {unflushed_gap:.1%} of the must-write without it"
    )
    return fused_gbs, headline


def thermal_headline(thermal, pauses):
    """Section 8: (fp16 TFLOP/s of the 4096 product with thermal_mode='off', the headline).

    `thermal` is section 8's {mode: {"row", "runs", "thresholds", ...}}, "off" first; `pauses` the number of runs
    each mode paused before (the section's own paused_before decides what a pause is).
    """
    off = thermal["off"]
    fp16_tflops = 2 * 4096**3 / off["row"]["AvgValue"] / 1e3
    runs = off["runs"]
    reason = runs.clock_held_by.mode().iloc[0] if runs.clock_held_by.notna().any() else "unknown (NVML gave no reason)"
    boost_mhz = off["row"]["ComputeClock"] / 1e3  # kHz -> MHz: the maximum boost clock, a device attribute
    paused = []
    for mode, result in thermal.items():
        if mode == "off":
            continue
        wait, cont = (result.get("thresholds", {}).get(key) for key in ("thermal_wait", "thermal_cont"))
        at = f" (wait at {wait} C, resume at {cont} C)" if wait is not None else ""
        paused.append(f"{mode}{at} paused {pauses[mode]} times")
    spreads = ", ".join(f"{result['row']['RelativeStdDevPct']:.2f}% {mode}" for mode, result in thermal.items())
    headline = (
        f"under load the SM clock ran {runs.sm_mhz.min():.0f}-{runs.sm_mhz.max():.0f} MHz (max boost"
        f" {boost_mhz:.0f}), held by {reason}, with a T.Limit margin of at least {runs.margin_c.min():.0f} C;"
        f" {'; '.join(paused)}; spread {spreads}"
    )
    return fp16_tflops, headline
