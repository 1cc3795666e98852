"""The headline of sections 4, 7 and 8: their figure and one line of what they showed, from the section's own table.

Each function is pure: it takes what the section's visible cells built and returns (figure value, headline text).
The folded -record cell of the section records the figure (harness.record_figure) and sets the headline; the
committed recordings under docs/verified/ hold both, as the recorded runs printed them.
"""


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


def thermal_headline(thermal, auto_pauses):
    """Section 8: (fp16 TFLOP/s of the 4096 product with thermal_mode='off', the headline).

    `thermal` is section 8's {mode: {"row", "runs", ...}}; `auto_pauses` the number of runs thermal_mode='auto'
    paused before (the section's own paused_before decides what a pause is).
    """
    off, auto = thermal["off"], thermal["auto"]
    fp16_tflops = 2 * 4096**3 / off["row"]["AvgValue"] / 1e3
    runs = off["runs"]
    reason = runs.clock_held_by.mode().iloc[0] if runs.clock_held_by.notna().any() else "unknown (NVML gave no reason)"
    rated_mhz = off["row"]["ComputeClock"] / 1e3  # kHz -> MHz: the clock the GPU is rated to boost to
    headline = (
        f"under load the SM clock ran {runs.sm_mhz.min():.0f}-{runs.sm_mhz.max():.0f} MHz (rated {rated_mhz:.0f}),"
        f" held by {reason},"
        f" with a T.Limit margin of at least {runs.margin_c.min():.0f} C; auto paused {auto_pauses}"
        f" times; spread {off['row']['RelativeStdDevPct']:.2f}% off, {auto['row']['RelativeStdDevPct']:.2f}% auto"
    )
    return fp16_tflops, headline
