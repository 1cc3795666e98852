"""The pictures of sections 3 and 5 from their tables: each saved under OUT_DIR, shown with alt text that gives the
data in words, and returned for the tests. Sections 6 to 10 show tables, and section 7 nsight's own plot."""

import matplotlib.pyplot as plt

from plumbing.harness import OUT_DIR

SAVE_OPTIONS = {"bbox_inches": "tight"}  # a picture keeps its titles and labels inside the saved file


def _show(figure, name, alt):
    """Save the figure as OUT_DIR/<name>.png, close it, and display the file with its alt text (IPython only)."""
    figure.savefig(OUT_DIR / f"{name}.png", **SAVE_OPTIONS)
    plt.close(figure)
    try:
        from IPython.display import Image, display
    except ImportError:  # a plain Python running the cells: the file is written, nothing to show
        return figure
    display(Image(OUT_DIR / f"{name}.png", alt=alt))
    return figure


def plot_run_spread(per_run):
    """Section 3: every run's kernel time, one column per (region, n), labelled with its relative spread."""
    groups = list(per_run.groupby(["Annotation", "n"], sort=False))
    figure, axes = plt.subplots(figsize=(8, 3.5))
    said = []
    for position, ((region, n), runs) in enumerate(groups):
        spread = f"{runs.Value.std() / runs.Value.mean():.1%}"
        axes.plot([position] * len(runs), runs.Value / 1e3, "o", alpha=0.5)
        axes.annotate(spread, (position, runs.Value.max() / 1e3), xytext=(0, 8), textcoords="offset points")
        said.append(f"{region} at n={n:,}: {len(runs)} runs, spread {spread}")
    axes.set_xticks(range(len(groups)), [f"{region}\nn={n:,}" for (region, n), _ in groups], fontsize=8)
    axes.set(yscale="log", ylabel="kernel time of each run (us)")
    axes.set_title("The shortest kernel scatters most: every run's time, labelled with its spread (std / mean)")
    return _show(figure, "s3_runs", "Dots on a log time axis, one column per region and size. " + "; ".join(said))


def plot_sweep(tflops_table, peaks, peaks_label):
    """Section 5: TFLOP/s by matrix size, one line per precision, with its datasheet peak dashed where known."""
    sizes = list(tflops_table.index)
    figure, axes = plt.subplots(figsize=(7, 4))
    for precision, key, color in (("float32", "fp32_tflops", "tab:blue"), ("float16", "fp16_tflops", "tab:orange")):
        axes.plot(sizes, tflops_table[precision], "o-", color=color, label=f"{precision}, measured")
        if peaks:
            axes.axhline(peaks[key], color=color, linestyle="--", label=f"{precision} peak ({peaks_label} datasheet)")
    axes.set(xscale="log", yscale="log", xlabel="matrix size n (n x n)", ylabel="throughput (TFLOP/s)")
    axes.set_xticks(sizes, [str(n) for n in sizes], minor=False)
    axes.set_title("Throughput grows with matrix size; float16 on tensor cores pulls away")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    said = [f"{p}: " + ", ".join(f"n={n} {tflops_table.loc[n, p]:.1f}" for n in sizes) for p in ("float32", "float16")]
    return _show(figure, "s5_sweep", f"Log-log lines of TFLOP/s against matrix size. {'; '.join(said)}")
