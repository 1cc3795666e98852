"""Section 6's roofline and section 10's report summary, run by their own cells on the committed recording.

A real kernel runs the notebook's harness, section 1's names from the recording, and each section's define and
analysis cells (by id, never copied), with the recorded frames and reports in place; the tests then read what a
learner sees (the table, the chart's drawn lines, the summary) and hold it against physics and against the
report read directly. Until the recording is re-made on the GPU runner after a change to what these sections
collect, each test fails with a message that says so (never a skip).
"""

from __future__ import annotations

import lzma
import math
import os
import re

import pytest
import recordings
from support import ROOT, RecordedNotebook, cell_by_id

from plumbing.cells import REPORT_FOLDERS

FOLDERS = recordings.recording_folders("ncu")

RERECORD = (
    "re-make it on the GPU runner (NSPY_RECORD_COMMIT=$(git rev-parse HEAD) python3 scripts/record_ncu.py), then "
    "run python scripts/render_recorded.py and commit the folder"
)
BUSY = 0.6  # the share of its roof at which section 6 names a limit
SIX_METRICS = {"dram__bytes_read.sum", "dram__bytes_write.sum"}  # added to section 6's call for the roofline
L2_METRICS = {"lts__t_bytes.sum", "lts__t_sector_hit_rate.pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed"}
# out_prefix folders (plumbing/cells.py): section 7's call's report, s10-profile's report with sections, and
# s10-stalls-profile's WarpStateStats report
FUSION_REPORT, SECTIONS_REPORT, STALLS_REPORT = "s7_fusion", "s10_sections", "s10_stalls"
assert {FUSION_REPORT, SECTIONS_REPORT, STALLS_REPORT} <= set(REPORT_FOLDERS), "report folders renamed in cells.py"


@pytest.fixture(scope="module", params=FOLDERS, ids=[folder.name for folder in FOLDERS])
def recorded(request, notebook, tmp_path_factory):
    runner = RecordedNotebook(notebook, request.param, tmp_path_factory.mktemp(request.param.name))
    yield runner
    runner.session.close()


def require_current_recording(recorded, section):
    """Fail (not skip) with what to do when the recording predates what the section now collects."""
    missing = []
    if section == 6:
        metrics = set(recorded.recording["variables"]["limits_frame"].Metric)
        if not SIX_METRICS <= metrics:
            missing.append(f"section 6's frame has no {sorted(SIX_METRICS - metrics)}")
    if section == "6-L2":
        metrics = set(recorded.recording["variables"]["limits_frame"].Metric)
        if not L2_METRICS <= metrics:
            missing.append(f"section 6's frame has no L2 counters {sorted(L2_METRICS - metrics)}")
    if section == 10 and not (recorded.folder / SECTIONS_REPORT).is_dir():
        missing.append(f"no {SECTIONS_REPORT}/ (s10-profile's report with sections)")
    if section == 10 and not (recorded.folder / STALLS_REPORT).is_dir():
        missing.append(f"no {STALLS_REPORT}/ (s10-stalls-profile's WarpStateStats report)")
    if missing:
        pytest.fail(f"the recording {recorded.folder.name} predates this change ({'; '.join(missing)}): {RERECORD}")


# ---------------------------------------------------------------- section 6: the roofline
def _kind(kernel: str) -> str:
    """Which of section 6's workloads a kernel is, by the name Nsight Compute gave it."""
    if re.search("gemm|xmma|sm90|cutlass|nvjet", kernel):
        return "matmul"
    return "softmax" if "softmax" in kernel else "scale" if "elementwise" in kernel else kernel


def _roofline(recorded):
    """Section 6's table by workload kind, the roof each kernel works under, and what the chart drew."""
    require_current_recording(recorded, 6)
    recorded.section(6)
    table = recorded.value("limits_table.to_dict('index')")
    kernels = recorded.value("limits_frame.groupby('Annotation', sort=False).Kernel.first().to_dict()")
    roof_keys = recorded.value("KERNEL_ROOF")
    rows = {
        _kind(kernel): {**table[region], "region": region, "roof": roof_keys[region]}
        for region, kernel in kernels.items()
    }
    assert set(rows) == {"matmul", "scale", "softmax"}, f"unexpected kernels in section 6: {kernels}"
    lines = recorded.value(
        "[{'label': str(line.get_label()), 'marker': str(line.get_marker()), 'style': str(line.get_linestyle()),"
        " 'x': [float(v) for v in line.get_xdata()], 'y': [float(v) for v in line.get_ydata()]}"
        " for line in roofline_figure.axes[0].lines]"
    )
    texts = recorded.value("[text.get_text() for text in roofline_figure.axes[0].texts]")
    return rows, lines, texts


def _drawn(lines, label_start):
    found = [line for line in lines if line["label"].startswith(label_start)]
    assert len(found) == 1, f"the roofline should draw one line labelled {label_start!r}: {[x['label'] for x in lines]}"
    return found[0]


def _height(line, x):
    """The drawn line's height at x, interpolated on the log-log axes."""
    xs, ys = [math.log(v) for v in line["x"]], [math.log(v) for v in line["y"]]
    assert xs[0] <= math.log(x) <= xs[-1], f"x={x} lies outside the drawn roof ({line['x'][0]}..{line['x'][-1]})"
    at = next(i for i in range(len(xs) - 1) if xs[i] <= math.log(x) <= xs[i + 1])
    fraction = (math.log(x) - xs[at]) / (xs[at + 1] - xs[at])
    return math.exp(ys[at] + fraction * (ys[at + 1] - ys[at]))


ROOF_LABEL = {"fp16_tflops": "fp16 tensor", "fp32_tflops": "fp32"}


def test_s6_roofs_are_the_detected_gpus_datasheet_peaks(recorded):
    _, lines, _ = _roofline(recorded)
    peaks = recorded.peaks()
    for key, name in ROOF_LABEL.items():
        roof = _drawn(lines, f"{name} roof")
        for x, y in zip(roof["x"], roof["y"], strict=True):
            expected = min(peaks[key], x * peaks["dram_gbs"] / 1e3)  # FLOP/byte x GB/s = GFLOP/s
            assert y == pytest.approx(expected, rel=1e-6), (
                f"the {name} roof at {x:.3g} FLOP/byte is drawn at {y:.4g} TFLOP/s, but min(compute peak "
                f"{peaks[key]}, intensity x {peaks['dram_gbs']} GB/s) is {expected:.4g}: check roof_tflops' units"
            )
        sixty = _drawn(lines, f"60% of the {name} roof")
        assert sixty["y"] == pytest.approx([BUSY * y for y in roof["y"]], rel=1e-6), (
            f"the dotted line under the {name} roof must be {BUSY:.0%} of it: it is the line that decides 'neither'"
        )
        ridges = [line for line in lines if line["marker"] == "D" and line["y"] == [peaks[key]]]
        ridge = peaks[key] * 1e12 / (peaks["dram_gbs"] * 1e9)
        assert ridges and ridges[0]["x"][0] == pytest.approx(ridge, rel=1e-6), (
            f"the {name} ridge point should be marked at {ridge:.1f} FLOP/byte (peak / bandwidth): {ridges}"
        )


def test_s6_every_kernel_sits_on_or_under_the_roof_above_it(recorded):
    rows, lines, texts = _roofline(recorded)
    points = [line for line in lines if line["marker"] == "o"]
    assert len(points) == 3, f"the chart should show one point per kernel: {points}"
    for kind, row in rows.items():
        point = next(p for p in points if p["x"][0] == pytest.approx(row["FLOP/byte"]))
        assert point["y"][0] == pytest.approx(row["TFLOP/s"]), f"{kind}: the chart's point differs from the table"
        roof = _height(_drawn(lines, f"{ROOF_LABEL[row['roof']]} roof"), point["x"][0])
        share = point["y"][0] / roof
        assert share <= 1.0, (
            f"{kind} is drawn at {share:.0%} of its roof: above a roof is impossible, so its FLOP count is too high, "
            "its DRAM bytes too few, its time too short, or it is under the wrong roof (KERNEL_ROOF)"
        )
        label = next(text for text in texts if text.startswith(f"{row['region']}:"))
        assert f"{100 * share:.0f}% of its roof" in label, f"{kind}: the label {label!r} should say {share:.0%}"


def test_s6_matmul_right_of_its_ridge_and_scale_left(recorded):
    rows, lines, _ = _roofline(recorded)
    ridge = {key: next(m["x"][0] for m in lines if m["marker"] == "D" and m["y"] == [recorded.peaks()[key]])
             for key in ROOF_LABEL}  # fmt: skip
    matmul, scale = rows["matmul"], rows["scale"]
    assert matmul["roof"] == "fp16_tflops" and matmul["FLOP/byte"] > ridge["fp16_tflops"], (
        f"the fp16 matmul ({matmul['FLOP/byte']:.0f} FLOP/byte) should sit right of the fp16 tensor ridge "
        f"({ridge['fp16_tflops']:.0f}): 2 n^3 FLOPs over about 3 n^2 x 2 bytes of DRAM traffic"
    )
    assert scale["roof"] == "fp32_tflops" and scale["FLOP/byte"] < ridge["fp32_tflops"], (
        f"x * 2.0 ({scale['FLOP/byte']:.3f} FLOP/byte) should sit left of the fp32 ridge ({ridge['fp32_tflops']:.0f}):"
        " one FLOP per 8 bytes"
    )


def test_s6_verdict_is_what_the_chart_shows(recorded):
    rows, lines, _ = _roofline(recorded)
    for kind, row in rows.items():
        roof_line = _drawn(lines, f"{ROOF_LABEL[row['roof']]} roof")
        ridge = next(m["x"][0] for m in lines if m["marker"] == "D" and m["y"] == [max(roof_line["y"])])
        share = row["TFLOP/s"] / _height(roof_line, row["FLOP/byte"])
        on_chart = "neither" if share < BUSY else "memory" if row["FLOP/byte"] < ridge else "compute"
        assert row["bottleneck"].startswith(on_chart), (
            f"{kind}: the chart puts it at {share:.0%} of its roof, {'left' if row['FLOP/byte'] < ridge else 'right'} "
            f"of the ridge ({on_chart}), but section 6 prints {row['bottleneck']!r}: check limit()"
        )
    verdicts = {kind: row["bottleneck"].split(" ")[0] for kind, row in rows.items()}
    assert verdicts == {"matmul": "compute", "scale": "memory", "softmax": "memory"}, (
        f"on the recorded GPU the lesson is matmul compute, scale and softmax memory: {verdicts}"
    )
    headline = recorded.value("SECTIONS[6]['headline']")
    assert all(row["bottleneck"] in headline for row in rows.values()), f"the headline hides a verdict: {headline}"


def test_s6_limit_names_a_roof_exactly_from_the_busy_line_the_chart_draws(recorded):
    """Just under the dotted line the chart draws for a roof, limit() must say neither; just over it, a roof."""
    rows, lines, _ = _roofline(recorded)
    for kind, row in rows.items():
        name, intensity = ROOF_LABEL[row["roof"]], row["FLOP/byte"]
        busy_line = next(line for line in lines if line["label"].endswith(f"of the {name} roof"))
        line_tflops = _height(busy_line, intensity)
        for factor, neither in ((0.98, True), (1.02, False)):
            verdict = recorded.value(f"limit({intensity!r}, {factor * line_tflops!r}, {row['roof']!r})")
            assert verdict.startswith("neither") == neither, (
                f"{kind}: at {factor:.0%} of the chart's dotted {busy_line['label']!r} line limit() says {verdict!r}:"
                " the verdict and the chart must use the same share of the roof (BUSY_SHARE)"
            )


def test_s6_flops_and_bytes_are_counted_from_the_workload_and_the_counters_shown_beside_them(recorded):
    rows, _, _ = _roofline(recorded)
    n, elements = recorded.value("MATMUL_N"), recorded.value("SCALE_ELEMENTS")
    softmax_elements = recorded.value("SOFTMAX_ROWS * SOFTMAX_COLUMNS")
    flops = {"matmul": 2 * n**3, "scale": elements, "softmax": 5 * softmax_elements}
    must = {"matmul": 3 * n * n * 2, "scale": 2 * elements * 4, "softmax": 2 * softmax_elements * 4}
    for kind in flops:
        assert rows[kind]["GFLOP"] * 1e9 == pytest.approx(flops[kind]), (
            f"{kind}: {rows[kind]['GFLOP']} GFLOP in the table, but its workload does {flops[kind]:.4g} FLOPs "
            "(a multiply-add is 2; x * 2.0 one per element; softmax 5 per element): check KERNEL_FLOPS"
        )
        assert rows[kind]["must move (MB)"] * 1e6 == pytest.approx(must[kind]), (
            f"{kind}: {rows[kind]['must move (MB)']} MB in the table, but reading every input once and writing every "
            f"output once moves {must[kind] / 1e6:.1f} MB (fp16: 2 bytes, fp32: 4): check KERNEL_BYTES"
        )
        assert rows[kind]["FLOP/byte"] == pytest.approx(flops[kind] / must[kind]), f"{kind}: intensity from must-move"
    counters = recorded.value("counters.to_dict('index')")
    frame = recorded.recording["variables"]["limits_frame"]
    l2 = recorded.recording["environment"]["l2_bytes"]
    for kind, row in rows.items():
        region = frame[frame.Annotation == row["region"]].set_index("Metric").AvgValue
        counted = region["dram__bytes_read.sum"] + region["dram__bytes_write.sum"]  # unit 'byte' in the recording
        assert counters[row["region"]]["DRAM counted (MB)"] * 1e6 == pytest.approx(counted), (
            f"{kind}: the counters table's DRAM bytes are not read + written from the recorded frame ({counted:.4g})"
        )
        if kind != "matmul":  # a streaming kernel: every byte once, less what the flushed window misses in L2
            assert must[kind] - 1.1 * l2 <= counted <= 1.02 * must[kind], (
                f"{kind} must move {must[kind] / 1e6:.0f} MB; the counters say {counted / 1e6:.0f} MB (an output "
                f"still in the {l2 / 2**20:.0f} MiB L2 at the end may go uncounted, no more)"
            )
    assert 0.5 <= rows["matmul"]["% of roof"] / 100 <= 1.0, (
        f"a 4096 fp16 matmul reaches {rows['matmul']['% of roof']:.0f}% of its tensor roof: outside 50-100%, "
        "so its FLOPs or its time is off"
    )


def test_s6_softmax_is_memory_bound_by_the_bytes_it_must_move_though_its_dram_counter_reads_under_60(recorded):
    rows, _, _ = _roofline(recorded)
    frame = recorded.recording["variables"]["limits_frame"]
    region = frame[frame.Annotation == rows["softmax"]["region"]].set_index("Metric")
    assert region.loc["gpu__time_duration.sum", "Unit"] == "ns", region
    seconds = region.loc["gpu__time_duration.sum", "AvgValue"] * 1e-9
    must = 2 * 4 * recorded.value("SOFTMAX_ROWS * SOFTMAX_COLUMNS")  # read the logits, write the probabilities
    share = must / seconds / 1e9 / recorded.peaks()["dram_gbs"]
    assert share >= BUSY, f"the softmax moves {must / 1e6:.1f} MB in {seconds * 1e6:.2f} us: {share:.0%} of peak DRAM"
    assert rows["softmax"]["bottleneck"] == "memory", (
        f"moving what it must at {share:.0%} of the DRAM peak is memory-bound, but s6-table says "
        f"{rows['softmax']['bottleneck']!r}: the roofline must use the bytes a kernel must move (KERNEL_BYTES)"
    )
    assert rows["softmax"]["% of roof"] == pytest.approx(100 * share, rel=1e-3), "the % of roof is the DRAM share"
    counters = recorded.value("counters.to_dict('index')")[rows["softmax"]["region"]]
    assert counters["counted / must move"] < 1 and counters["DRAM %"] < 100 * BUSY, (
        f"on this recording the flushed window counted fewer bytes than the softmax must move, and its DRAM counter "
        f"read under {BUSY:.0%}: the old 'neither' came from there ({counters})"
    )


def test_s6_l2_counters_show_the_memory_traffic_where_the_dram_counters_miss_it(recorded):
    require_current_recording(recorded, "6-L2")
    rows, _, _ = _roofline(recorded)
    counters = recorded.value("counters.to_dict('index')")
    for kind, row in rows.items():
        seen = counters[row["region"]]
        assert seen["L2 traffic (MB)"] >= 0.98 * row["must move (MB)"], (
            f"{kind}: every byte an SM reads or writes in global memory passes L2, yet L2 saw "
            f"{seen['L2 traffic (MB)']:.1f} MB of the {row['must move (MB)']:.1f} MB it must move: check s6-check"
        )
        assert 0 <= seen["L2 hit %"] <= 100 and 0 <= seen["L2 %"] <= 100, seen
        if row["bottleneck"] == "memory":
            assert max(seen["DRAM %"], seen["L2 %"]) >= 100 * BUSY, (
                f"{kind} is memory-bound by the roofline, so DRAM or L2 must be at least {BUSY:.0%} busy: {seen}"
            )


# ---------------------------------------------------------------- section 10: the report summarised
@pytest.fixture(scope="module")
def reports(recorded, tmp_path_factory):
    """Section 7's and s10-profile's launches, read directly with ncu_report (not by the notebook's code)."""
    import ncu_report

    if not all((recorded.folder / name).is_dir() for name in (SECTIONS_REPORT, STALLS_REPORT)):
        return {}  # each test fails with require_current_recording's message

    out = tmp_path_factory.mktemp("reports")
    recordings.restore_report_folders(recorded.folder, out)
    opened = {}
    for name in REPORT_FOLDERS:
        (path,) = sorted((out / name).glob("*.ncu-rep"))
        report = ncu_report.load_report(str(path))
        opened[name] = [
            report.range_by_idx(r).action_by_idx(a)
            for r in range(report.num_ranges())
            for a in range(report.range_by_idx(r).num_actions())
        ]
    recorded.section(10)
    return opened


def _value(action, name):
    metric = action.metric_by_name(name)
    return None if metric is None else metric.value()


def test_s10_launches_are_labelled_by_run_region_and_version(recorded, reports):
    require_current_recording(recorded, 10)
    launches = recorded.value("launches.to_dict('records')")
    frame = recorded.recording["variables"]["fusion_frame"]
    runs = int(frame.NumRuns.iloc[0])
    assert len(launches) == len(reports[FUSION_REPORT]) == 3 * runs, launches
    keys = [(row["run"], row["region"], row["kernel in region"]) for row in launches]
    assert len(set(keys)) == len(keys), f"two launches carry the same labels: {keys}"
    for row in launches:
        expected = {"addcmul": ("fused", 1), "multiply, then add": ("unfused", 2)}[row["region"]]
        assert row["version"] == expected[0] and 1 <= row["kernel in region"] <= expected[1], row
    assert sorted({row["run"] for row in launches}) == list(range(1, runs + 1)), "runs should count 1..NumRuns"
    fused = [row for row in launches if row["version"] == "fused"]
    assert [row["run"] for row in fused] == list(range(1, runs + 1)), f"one fused launch per run: {fused}"


def test_s10_summary_numbers_are_the_reports_own(recorded, reports):
    require_current_recording(recorded, 10)
    summary = recorded.value("fused_summary.to_dict('index')")
    names = recorded.value("SUMMARY_METRICS")
    (fused,) = reports[SECTIONS_REPORT]
    assert "addcmul" in fused.name(fused.NameBase_DEMANGLED), f"s10-profile profiled {fused.name()}, not addcmul"
    in_s7 = [a for a in reports[FUSION_REPORT] if "addcmul" in a.name(a.NameBase_DEMANGLED)]
    for line, name in names.items():
        direct = _value(fused, name)
        assert direct is not None, f"s10-profile's report lacks {name} ({line}): add it to --metrics or a section"
        shown = summary[line]["value"]
        assert shown == pytest.approx(direct, rel=1e-3, abs=0.051), (
            f"the summary's {line} ({shown}) is not the report's {name} ({direct})"
        )
        s7_direct = _value(in_s7[0], name)
        s7_shown = summary[line]["in section 7's report"]
        if s7_direct is None:
            assert s7_shown == "not collected", f"{line}: section 7's report has no {name}, yet the table shows one"
        else:
            assert s7_shown == pytest.approx(s7_direct, rel=1e-3, abs=0.051), f"{line}: {s7_shown} vs {s7_direct}"


def test_s10_summary_metric_names_exist_for_a_t4(recorded, reports):
    require_current_recording(recorded, 10)
    names = list(recorded.value("SUMMARY_METRICS").values())
    families = ROOT / "docs" / "verified" / recorded.folder.name / "tu104_metrics.txt"
    suffixes = ROOT / "docs" / "verified" / recorded.folder.name / "tu104_metric_suffixes.txt"
    listed_bases = {line.split()[0] for line in families.read_text().splitlines() if re.match(r"^[a-z0-9]+__", line)}
    listed_full = {line.split()[0] for line in suffixes.read_text().splitlines() if re.match(r"^[a-z0-9]+__", line)}
    for name in names:
        if "." in name:  # a hardware counter: the chip must have it
            assert name.split(".")[0] in listed_bases, f"{name} is not a tu104 metric ({families.name})"
            assert name in listed_full, (
                f"{name}: its suffix is not in {suffixes.name}, which lists the notebook's base metrics of the "
                f"recording; a new base metric needs the list re-made: {RERECORD}"
            )
        else:  # a launch attribute or occupancy limit Nsight Compute records with every launch, asked for or not
            (s7_first, *_) = reports[FUSION_REPORT]
            assert _value(s7_first, name) is not None, f"{name} is not recorded with every launch (section 7's report)"


def test_s10_fused_kernel_speed_of_light_says_memory_bound_with_occupancy_within_its_limit(recorded, reports):
    require_current_recording(recorded, 10)
    (fused,) = reports[SECTIONS_REPORT]
    names = recorded.value("SUMMARY_METRICS")
    compute, memory, dram = (
        _value(fused, names[line]) for line in ("compute (SM) throughput", "memory throughput", "DRAM throughput")
    )
    assert memory > 2 * compute and dram >= 100 * BUSY, (
        f"addcmul streams three tensors in and one out: memory {memory:.0f}% and DRAM {dram:.0f}% of peak should "
        f"dwarf compute {compute:.0f}% (sections 6 and 7 call such a kernel memory-bound)"
    )
    theoretical, achieved = (_value(fused, names[line]) for line in ("theoretical occupancy", "achieved occupancy"))
    assert 0 < achieved <= theoretical <= 100, f"occupancy: achieved {achieved}% against theoretical {theoretical}%"


def test_s10_rules_come_with_sections_and_cost_replay_passes(recorded, reports):
    require_current_recording(recorded, 10)
    (fused,) = reports[SECTIONS_REPORT]
    s7_first = reports[FUSION_REPORT][0]
    assert len(s7_first.rule_results()) == 0, "a --metrics collection should carry no rule results"
    assert len(fused.rule_results()) > 0, "ncu with SpeedOfLight, LaunchStats and Occupancy should carry rule results"
    costs = recorded.value("costs.to_dict()")
    sections, metric_list = costs["this section: ncu, 3 sections"], costs["section 7: nsight-python, --metrics"]
    assert sections["rule results"] == len(fused.rule_results())
    assert sections["replay passes"] == _value(fused, "profiler__replayer_passes"), "passes not read from the report"
    assert metric_list["replay passes"] == _value(s7_first, "profiler__replayer_passes")
    assert sections["replay passes"] > metric_list["replay passes"], (
        f"the sections took {sections['replay passes']} passes, the metric list {metric_list['replay passes']}"
    )
    printed = recorded.section(10)
    assert all(result["name"] in printed for result in fused.rule_results_as_dicts()), "a rule result is not shown"


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_s10_opens_the_newest_report_in_section_7s_folder(notebook, folder, tmp_path):
    """A second Run all leaves older reports beside the new one: section 10 must read the one this run wrote."""
    runner = RecordedNotebook(notebook, folder, tmp_path)
    try:
        older = runner.out / FUSION_REPORT / "ncu-output-an-earlier-run.ncu-rep"
        older.parent.mkdir(parents=True, exist_ok=True)
        sections = folder / SECTIONS_REPORT
        older.write_bytes(lzma.decompress(next(sections.glob("*.ncu-rep.xz")).read_bytes()))  # a report, not s7's
        os.utime(older, (1_000_000_000, 1_000_000_000))  # 2001: older than anything restored now
        _run_cells(runner, ["s10-helpers", "s10-report"])
        regions = set(runner.value("launches['region'].tolist()"))
        assert regions == {"multiply, then add", "addcmul"}, (
            f"section 10 read {regions} from {runner.value('report_path.name')}: it must open the newest report "
            "in section 7's folder (this run's), not an older one (s10-report)"
        )
    finally:
        runner.session.close()


# ---------------------------------------------------------------- section 10 on the committed report alone
def _run_cells(runner, cell_ids):
    """Section 10's opener and define cell, then only `cell_ids`: the cells that read the committed reports.

    The whole section also runs s10-stalls-profile and s10-details, which need ncu; these cells do not. The section
    stays NOT RUN (its last cell, s10-record, is not among them).
    """
    recordings.restore_report_folders(runner.folder, runner.out)
    printed = []  # a cell that raises raises here (KernelSession.run), with its traceback
    for cell_id in ["s10-open", "s10-define", *cell_ids]:
        printed.append(runner.session.run(cell_by_id(runner.notebook, cell_id).source, timeout=300))
    return "\n".join(printed)


@pytest.fixture(scope="module")
def summary_cells(notebook, tmp_path_factory):
    """The fused kernel's summary and rules, printed by the notebook's cells from the committed s10_sections report."""
    folder = FOLDERS[-1]
    if not (folder / SECTIONS_REPORT).is_dir():
        pytest.fail(f"the recording {folder.name} has no {SECTIONS_REPORT}/: {RERECORD}")
    runner = RecordedNotebook(notebook, folder, tmp_path_factory.mktemp("summary-cells"))
    try:
        printed = _run_cells(runner, ["s10-helpers", "s10-report", "s10-summary", "s10-rules"])
        yield runner, printed
    finally:
        runner.session.close()


def _sections_report(runner):
    import ncu_report

    (path,) = sorted((runner.out / SECTIONS_REPORT).glob("*.ncu-rep"))
    report = ncu_report.load_report(str(path))
    return report.range_by_idx(0).action_by_idx(0)


def test_s10_prints_each_rule_message_whole_with_section_links_as_names(summary_cells):
    runner, printed = summary_cells
    fused = _sections_report(runner)
    results = fused.rule_results_as_dicts()
    assert results, "the committed report with sections should carry rule results"
    flowing = " ".join(printed.split())  # the cell wraps the advice at 110 characters
    for result in results:
        whole = re.sub(r"@section:[^:@]+:([^@]+)@", r"\1", result["rule_message"]["message"])
        assert " ".join(whole.split()) in flowing, (
            f"rule {result['name']}: its whole message should be printed, a link to a section as the section's name; "
            f"expected {whole!r} (check rule_lines in s10-rules: no cut, @section:...@ replaced)"
        )
    assert "@section:" not in printed, "a rule's link markup reached the page: replace it with the section's name"


def test_s10_names_the_resource_that_limits_blocks_per_sm_as_the_occupancy_rule_does(summary_cells):
    runner, printed = summary_cells
    fused = _sections_report(runner)
    direct = {kind: _value(fused, f"launch__occupancy_limit_{kind}") for kind in ("registers", "shared_mem", "warps")}
    direct["blocks"] = _value(fused, "launch__occupancy_limit_blocks")
    line = next(line for line in printed.splitlines() if line.startswith("blocks per SM allowed by each resource:"))
    assert str(direct) in line, f"s10-summary should print the report's occupancy limits {direct}: {line!r}"
    fewest = min(direct, key=direct.get)
    words = {"registers": "registers", "shared_mem": "shared memory", "warps": "warps", "blocks": "blocks"}
    occupancy_rules = [r for r in fused.rule_results_as_dicts() if r["section_identifier"] == "Occupancy"]
    if occupancy_rules and "limited by" in occupancy_rules[0]["rule_message"]["message"]:
        advice = occupancy_rules[0]["rule_message"]["message"]
        assert words[fewest] in advice.split("limited by", 1)[1], (
            f"the printed limits make {fewest} the limiter ({direct}); Nsight Compute's rule says: {advice}"
        )


def test_s10_waves_per_sm_are_the_grid_over_what_all_sms_hold_at_once(summary_cells):
    runner, _ = summary_cells
    fused = _sections_report(runner)
    summary = runner.value("fused_summary.to_dict('index')")
    waves = summary["waves per SM"]["value"]
    assert waves == pytest.approx(_value(fused, "launch__waves_per_multiprocessor"), abs=0.051), summary
    blocks_per_sm = min(_value(fused, f"launch__occupancy_limit_{kind}") for kind in ("registers", "shared_mem",
                                                                                    "warps", "blocks"))  # fmt: skip
    sms = _value(fused, "device__attribute_multiprocessor_count")
    grid = _value(fused, "launch__grid_size")
    assert waves == pytest.approx(grid / (blocks_per_sm * sms), rel=0.01), (
        f"{waves} waves per SM, but a grid of {grid:.0f} blocks over {sms:.0f} SMs holding {blocks_per_sm:.0f} blocks "
        f"each takes {grid / (blocks_per_sm * sms):.2f}: is the summary's row the report's waves metric?"
    )


# ---------------------------------------------------------------- section 10: stall reasons and the Details page
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")


def test_s10_stall_reasons_are_the_reports_own_for_section_6s_kernel_furthest_below_its_roof(recorded, reports):
    require_current_recording(recorded, 10)
    (stalled,) = reports[STALLS_REPORT]
    direct = {m[1]: stalled.metric_by_name(m[0]).value() for m in map(STALL.fullmatch, stalled.metric_names()) if m}
    assert direct, f"the WarpStateStats report holds no stall metrics: {sorted(stalled.metric_names())[:20]}"
    shown = recorded.value("stalls.to_dict()")
    assert shown == pytest.approx(direct), (
        f"s10-stalls' table is not the report's smsp__average_warps_issue_stalled_*_per_issue_active.ratio values: "
        f"{shown} against {direct}"
    )
    rows, _, _ = _roofline(recorded)
    furthest = min(rows, key=lambda kind: rows[kind]["TFLOP/s"] / rows[kind]["roof (TFLOP/s)"])
    assert _kind(stalled.name()) == furthest, (
        f"s10-stalls-profile profiled {stalled.name()}, but section 6's kernel furthest below its roof is the "
        f"{furthest} ({ {kind: round(row['% of roof'], 1) for kind, row in rows.items()} })"
    )
    top = max(direct, key=direct.get)
    headline = recorded.value("SECTIONS[10]['headline']")
    assert f"{stalled.name()} stalls most on {top} ({direct[top]:.2f} " in headline, (
        f"the headline should name the largest stall reason, {top} ({direct[top]:.2f}): {headline!r}"
    )


def test_s10_details_page_holds_each_section_of_the_report_and_its_rule_messages_whole(recorded, reports):
    require_current_recording(recorded, 10)
    (fused,) = reports[SECTIONS_REPORT]
    printed = recorded.recording["cells"]["s10-details"]["output"]
    titles = [section.name() for section in fused.sections()]
    missing = [title for title in titles if f"Section: {title}" not in printed]
    assert titles and not missing, f"ncu --import --page details printed no 'Section: ...' for {missing}: {printed!r}"
    flowing = " ".join(printed.split())  # the page wraps each rule's text over several lines
    for result in fused.rule_results_as_dicts():
        message = re.sub(r"@section:[^:@]+:([^@]+)@", r"\1", result["rule_message"]["message"])  # a link: its name
        message = " ".join(message.split())
        assert message in flowing, f"rule {result['name']}: its whole message is not on the Details page: {message}"
