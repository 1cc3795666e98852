"""Figures the lessons print, from the notebook's own cells, against an independent computation.

On the committed recordings of both backends (Nsight Compute in launch mode, and CUPTI) a real kernel runs each
section's own cells, the run cells replaced by what they bound on the GPU machine. Each test recomputes a printed
figure from the raw frame in base units (seconds, FLOP, bytes) and compares. Functions that only run on a GPU (the
host-clock timers, the NVML collectors) run here on a simulated machine: a stand-in torch or NVML whose answers
are known, so that a unit or a factor shows at once.
"""

from __future__ import annotations

import math
import re
import sys
import time
import types

import nsight
import pytest
import recordings
from support import RecordedNotebook, cell_by_id

BOTH = recordings.recording_folders("ncu") + recordings.recording_folders("cupti")


@pytest.fixture(scope="module", params=BOTH, ids=[folder.name for folder in BOTH])
def recorded(request, notebook, tmp_path_factory):
    runner = RecordedNotebook(notebook, request.param, tmp_path_factory.mktemp(request.param.name))
    yield runner
    runner.close()


def close(value, expected, what, rel=1e-6):
    assert math.isclose(value, expected, rel_tol=rel), f"{what}: the cell gives {value}, the raw frame {expected}"


# ---------------------------------------------------------------- section 2: one product's TFLOP/s
def test_s2_tflops_is_two_n_cubed_over_the_recorded_kernel_time(recorded):
    printed = recorded.section(2)
    row = recorded.value("first_row.to_dict()")
    assert row["Unit"] == "ns", f"section 2 reads AvgValue as ns, the frame says {row['Unit']}"
    seconds = row["AvgValue"] * 1e-9
    expected = 2 * 2048**3 / seconds / 1e12  # 2048^3 multiply-adds, two FLOP each
    close(recorded.value("product_tflops"), expected, "section 2's TFLOP/s of the 2048 product")
    assert f"{expected:,.1f} TFLOP/s" in printed and f"{seconds * 1e6:,.1f} us" in printed, printed[-800:]


# ---------------------------------------------------------------- section 3: the spread table
def test_s3_spread_table_shows_means_and_ci95_half_widths_in_microseconds(recorded):
    recorded.section(3)
    frame = recorded.value("repeats_frame.to_dict('records')")
    table = recorded.value("spread.to_dict('records')")
    assert {row["Unit"] for row in frame} == {"ns"}, "section 3's table reads the frame's times as ns"
    assert len(table) == len(frame), "one table row per region and configuration"
    for position, (raw, shown) in enumerate(zip(frame, table, strict=True)):
        close(shown["mean (us)"], raw["AvgValue"] * 1e-9 * 1e6, f"row {position}'s mean (us)")
        half = (raw["CI95_Upper"] - raw["CI95_Lower"]) / 2  # a half-width is half the interval
        close(shown["CI95 half-width (us)"], half * 1e-9 * 1e6, f"row {position}'s CI95 half-width (us)")
        assert shown["runs"] == raw["NumRuns"] and shown["RSD %"] == raw["RelativeStdDevPct"]


def test_s3_timing_table_puts_each_method_beside_nsights_kernel_time_in_microseconds(recorded):
    recorded.section(3)
    samples = recorded.value("samples")  # microseconds, as each timer returns them (tested on a simulated GPU below)
    row = recorded.value("nsight_row.to_dict()")
    assert row["Unit"] == "ns", f"nsight's kernel time comes in {row['Unit']}"
    nsight_us = row["AvgValue"] * 1e-9 * 1e6
    table = recorded.value("timing_table.to_dict('index')")
    close(table["nsight-python"]["mean of 10 (us)"], nsight_us, "nsight-python's mean (us)")
    for method, values in samples.items():
        shown = table[method]
        close(shown["mean of 10 (us)"], sum(values) / len(values), f"{method}: mean of 10 (us)")
        close(shown["x nsight"], sum(values) / len(values) / nsight_us, f"{method}: x nsight")
        close(shown["lowest x nsight"], min(values) / nsight_us, f"{method}: lowest x nsight")
        close(shown["highest x nsight"], max(values) / nsight_us, f"{method}: highest x nsight")


# ---------------------------------------------------------------- section 5: derived TFLOP/s
def test_s5_derive_metric_turns_a_kernel_time_into_tflops(recorded):
    recorded.section(5)
    times = recorded.value("sweep_frame[sweep_frame.Metric == 'gpu__time_duration.sum'].to_dict('records')")
    assert times and {row["Unit"] for row in times} == {"ns"}, "section 5's frame must hold the kernel times in ns"
    for row in times:
        n, nanoseconds = int(row["n"]), float(row["AvgValue"])
        value, unit = recorded.value(f"matmul_tflops({nanoseconds!r}, {n})")
        expected = 2 * n**3 / (nanoseconds * 1e-9) / 1e12
        assert unit == "TFLOP/s", unit
        close(value, expected, f"matmul_tflops at n={n} ({row['Annotation']})")


def test_s5_table_holds_each_precisions_derived_tflops_by_size(recorded):
    recorded.section(5)
    derived = recorded.value("sweep_frame[sweep_frame.Metric == 'matmul_tflops'].to_dict('records')")
    table = recorded.value("tflops_table.to_dict('index')")  # {n: {precision: TFLOP/s}}
    assert derived, "section 5's frame holds no matmul_tflops rows: derive_metric did not run"
    for row in derived:
        close(table[str(row["n"])][row["Annotation"]], row["AvgValue"], f"n={row['n']} {row['Annotation']}")
    assert list(next(iter(table.values()))) == ["float32", "float16"], "one column per precision, float32 first"


# ---------------------------------------------------------------- section 3's timers on a simulated GPU
class SimulatedStream:
    """torch.cuda on a GPU whose every product takes PRODUCT_S once the host waits for it."""

    PRODUCT_S = 0.03
    EVENT_MS = 1.5  # what Event.elapsed_time reports (milliseconds, as torch documents)

    def __init__(self):
        self.queued = 0

    def synchronize(self):
        time.sleep(self.queued * self.PRODUCT_S)
        self.queued = 0

    def Event(self, enable_timing=False):  # noqa: N802 - torch.cuda.Event
        stream = self

        class Event:
            def record(self):
                pass

            def synchronize(self):
                stream.synchronize()

            def elapsed_time(self, end):
                return stream.EVENT_MS

        return Event()


class Square:
    def __init__(self, stream):
        self.stream = stream

    def __matmul__(self, other):
        self.stream.queued += 1  # queued at once, as a CUDA launch is
        return self


def test_s3_host_clock_and_event_timers_report_microseconds(notebook, tmp_path):
    stream = SimulatedStream()
    namespace = {
        "torch": types.SimpleNamespace(cuda=stream),
        "nsight": nsight,
        "time": time,
        "add_kernels": lambda a, b: a + b,
        "out_prefix": lambda name: str(tmp_path / name),
        "QUIET": nsight.VerbosityLevel.SILENT,
    }
    exec(cell_by_id(notebook, "s3-timing-define").source, namespace)  # noqa: S102 - the notebook's own cell
    namespace["timing_square"] = Square(stream)
    waited = namespace["host_clock_us"](synchronize=True)
    assert 0.9 * stream.PRODUCT_S * 1e6 < waited < 3 * stream.PRODUCT_S * 1e6, (
        f"host_clock_us(synchronize=True) gave {waited} for a {stream.PRODUCT_S * 1e3:.0f} ms product: "
        "it must return microseconds of the host's clock"
    )
    queued = namespace["host_clock_us"](synchronize=False)
    assert 0 <= queued < 0.5 * stream.PRODUCT_S * 1e6, f"without synchronize the host only queues: {queued} us"
    close(namespace["cuda_events_us"](), stream.EVENT_MS * 1e3, "cuda_events_us (elapsed_time is in ms)")


# ---------------------------------------------------------------- section 8's collectors on a simulated NVML
def simulated_nvml(power_mw, cap_mw, reasons):
    """A pynvml whose GPU draws power_mw, is capped at cap_mw and is held down by the `reasons` bit mask."""
    nvml = types.ModuleType("pynvml")
    bits = {
        "nvmlClocksEventReasonSwPowerCap": 0x4,
        "nvmlClocksEventReasonHwSlowdown": 0x8,
        "nvmlClocksEventReasonSwThermalSlowdown": 0x20,
        "nvmlClocksEventReasonHwThermalSlowdown": 0x40,
        "nvmlClocksEventReasonHwPowerBrakeSlowdown": 0x80,
    }  # NVML's own values (nvml.h)
    vars(nvml).update(bits, NVML_CLOCK_SM=1, NVML_TEMPERATURE_GPU=0)
    vars(nvml).update(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: "gpu0",
        nvmlDeviceGetPowerUsage=lambda handle: power_mw,
        nvmlDeviceGetEnforcedPowerLimit=lambda handle: cap_mw,
        nvmlDeviceGetCurrentClocksEventReasons=lambda handle: sum(bits[name] for name in reasons),
        nvmlDeviceGetClockInfo=lambda handle, kind: 1755,
        nvmlDeviceGetTemperature=lambda handle, kind: 61,
        nvmlDeviceGetMarginTemperature=lambda handle: 22,
    )
    return nvml


def section_8_collectors(notebook, monkeypatch, **machine):
    monkeypatch.setitem(sys.modules, "pynvml", simulated_nvml(**machine))
    namespace = {"nsight": nsight}
    for cell_id in ("s8-collectors", "s8-limits"):
        exec(cell_by_id(notebook, cell_id).source, namespace)  # noqa: S102 - the notebook's own cells
    return namespace


def test_s8_power_collectors_read_watts(notebook, monkeypatch):
    found = section_8_collectors(notebook, monkeypatch, power_mw=412_345, cap_mw=700_000, reasons=[])
    close(found["power_w"]("fp16 product", 4096), 412.345, "power_w (NVML reports mW)")
    close(found["power_cap_w"](), 700.0, "power_cap_w (NVML reports mW)")


@pytest.mark.parametrize(
    ("reasons", "named"),
    [
        ([], "nothing"),
        (["nvmlClocksEventReasonSwPowerCap"], "power cap"),
        (["nvmlClocksEventReasonSwThermalSlowdown"], "thermal"),
        (
            ["nvmlClocksEventReasonSwPowerCap", "nvmlClocksEventReasonHwThermalSlowdown"],
            "power cap, thermal (hardware)",
        ),
    ],
)
def test_s8_clock_held_by_names_exactly_the_limits_nvml_reports(notebook, monkeypatch, reasons, named):
    found = section_8_collectors(notebook, monkeypatch, power_mw=300_000, cap_mw=700_000, reasons=reasons)
    assert found["clock_held_by"]("fp16 product", 4096) == named, f"NVML reported {reasons or 'no reason'}"


def test_s8_manual_thresholds_pause_just_above_the_lowest_margin_and_resume_within_what_the_off_runs_saw(recorded):
    recorded.section(3)  # section 8 compares with section 3's product
    recorded.section(8)
    margins = [row["margin_c"] for row in recorded.value("thermal['off']['runs'].to_dict('records')")]
    chosen = recorded.value("manual_thresholds(thermal['off']['runs'])")
    low, high = min(margins), max(margins)
    if high < low + 2:
        assert chosen == {}, f"the margin moved {high - low} C: nsight's defaults, not {chosen}"
        return
    assert chosen["thermal_wait"] == math.floor(low) + 1, f"pause 1 C above the lowest margin ({low}): {chosen}"
    assert chosen["thermal_wait"] < chosen["thermal_cont"] <= high, f"resume above the pause, within {high}: {chosen}"
    assert chosen == recorded.value("thermal['manual']['thresholds']"), "the thresholds the GPU run used"
    steady = recorded.value("manual_thresholds(thermal['off']['runs'].assign(margin_c=20.5))")
    assert steady == {}, f"a margin that never moves gives nsight's defaults, not {steady}"


def test_s8_table_shows_each_modes_extremes_of_what_the_collectors_read(recorded):
    recorded.section(3)  # section 8 compares with section 3's product
    recorded.section(8)
    shown = recorded.value(  # the table s8-table displayed (IPython keeps each displayed value in Out)
        "[v.to_dict() for v in Out.values() if hasattr(v, 'index') and 'SM clock, lowest (MHz)' in v.index][-1]"
    )
    for mode in ("off", "manual"):
        runs = recorded.value(f"thermal[{mode!r}]['runs'].to_dict('list')")
        row = recorded.value(f"thermal[{mode!r}]['row'].to_dict()")
        column = shown[mode]
        expected = {
            "mean time (us)": row["AvgValue"] * 1e-9 * 1e6,
            "SM clock, lowest (MHz)": min(runs["sm_mhz"]),
            "SM clock, highest (MHz)": max(runs["sm_mhz"]),
            "power, highest (W)": max(runs["power_w"]),
            "temperature, highest (C)": max(runs["temperature_c"]),
            "T.Limit margin, lowest (C)": min(runs["margin_c"]),
        }
        for name, value in expected.items():
            assert math.isclose(column[name], round(value, 1), abs_tol=0.051), (
                f"thermal_mode={mode!r}: the table shows {name} = {column[name]}, the collectors read {value}"
            )


# ---------------------------------------------------------------- section 9: the gap and its headline
def test_s9_comparison_shows_cuptis_time_in_us_and_how_many_kernels_each_product_launched(recorded):
    recorded.section(9)
    rows = {row["n"]: row for row in recorded.value("cupti_result")["rows"]}
    table = recorded.value("comparison.to_dict('index')")
    assert sorted(int(n) for n in table) == sorted(rows), "one row per size the child measured"
    for n, row in rows.items():
        shown = table[str(n)]
        close(shown["CUPTI (us)"], row["AvgValue"] * 1e-9 * 1e6, f"n={n}: CUPTI (us)")
        launched = len(row["Kernel"].split("|"))  # nsight joins the names of a region's kernels with |
        assert shown["kernels"] == launched, f"n={n}: {row['Kernel']} is {launched} kernel(s), shown {shown['kernels']}"


NCU = recordings.recording_folders("ncu")


@pytest.fixture(scope="module", params=NCU, ids=[folder.name for folder in NCU])
def under_ncu(request, notebook, tmp_path_factory):
    runner = RecordedNotebook(notebook, request.param, tmp_path_factory.mktemp(f"s9-{request.param.name}"))
    yield runner
    runner.close()


def test_s9_gap_is_split_at_the_smallest_size_and_the_headline_names_the_largest_gap(under_ncu):
    under_ncu.section(9)
    cupti = {row["n"]: row["AvgValue"] * 1e-9 for row in under_ncu.value("cupti_result")["rows"]}
    ncu = {row["n"]: row["AvgValue"] * 1e-9 for row in under_ncu.value("ncu_matmul_frame.to_dict('records')")}
    smallest = min(cupti)
    gap = under_ncu.value("gap")
    close(gap["Nsight Compute, caches flushed (us)"], ncu[smallest] * 1e6, f"flushed time at n={smallest}")
    close(gap["CUPTI (us)"], cupti[smallest] * 1e6, f"CUPTI time at n={smallest}")
    largest_gap = max(abs(cupti[n] / ncu[n] - 1) for n in cupti)
    headline = under_ncu.value("SECTIONS[9]['headline']")
    assert headline.startswith(f"largest time gap {largest_gap:.0%},"), (
        f"the headline must name the largest gap between the tools ({largest_gap:.0%}): {headline}"
    )


# ---------------------------------------------------------------- headlines, read back against the tables
def numbers(text: str) -> list[float]:
    return [float(value.replace(",", "")) for value in re.findall(r"\d[\d,]*\.?\d*", text)]


def test_s4_headline_gives_the_small_inputs_times_and_the_large_inputs_memory_clock(under_ncu):
    under_ncu.section(4)
    rows = under_ncu.value("clock_table.to_dict('records')")
    small = min(row["input (MiB)"] for row in rows)
    time_of = {(row["cache"], row["clock"]): row["time (us)"] for row in rows if row["input (MiB)"] == small}
    large = max(rows, key=lambda row: (row["input (MiB)"], row["cache"] == "all", row["clock"] == "none"))
    headline = under_ncu.value("SECTIONS[4]['headline']")
    cold, warm, base, memory_mhz = numbers(headline)[:4]
    expected = (time_of[("all", "none")], time_of[("none", "none")], time_of[("all", "base")])
    assert (cold, warm, base) == tuple(round(value, 1) for value in expected), (
        f"the headline gives the small input's time flushed, unflushed and flushed at base clock {expected}: {headline}"
    )
    assert memory_mhz == round(large["memory clock (MHz)"]), f"the large input's memory clock: {headline}"


def test_s7_headline_ratios_are_the_tables_bytes_and_times(under_ncu):
    under_ncu.section(7)
    table = under_ncu.value("fusion_table.to_dict('index')")
    two, one = table["multiply, then add"], table["addcmul"]
    headline = under_ncu.value("SECTIONS[7]['headline']")
    fewer_bytes, sooner = numbers(headline)[:2]
    moved = (two["read (MB)"] + two["written (MB)"]) / (one["read (MB)"] + one["written (MB)"])
    assert fewer_bytes == round(moved, 2), f"the unfused version moves {moved:.2f}x the fused one's bytes: {headline}"
    assert sooner == round(two["time (us)"] / one["time (us)"], 2), (
        f"the fused kernel ends {two['time (us)'] / one['time (us)']:.2f}x sooner (unfused time over fused): {headline}"
    )


def test_s8_headline_gives_the_clock_range_the_collectors_read_and_the_maximum_boost_in_mhz(recorded):
    recorded.section(3)  # section 8 compares with section 3's product
    recorded.section(8)
    runs = recorded.value("thermal['off']['runs'].to_dict('list')")
    row = recorded.value("thermal['off']['row'].to_dict()")
    headline = recorded.value("SECTIONS[8]['headline']")
    low, high, boost = numbers(headline)[:3]
    assert (low, high) == (round(min(runs["sm_mhz"])), round(max(runs["sm_mhz"]))), f"the SM clock range: {headline}"
    assert boost == round(row["ComputeClock"] / 1e3), f"ComputeClock is in kHz; the headline gives MHz: {headline}"
