"""Section 7, fusion measured in bytes: its refusal, table, verdict, figure and bar plot against the recorded rows and
report, with the tensors each version must move counted here from the lesson's shapes."""

import hashlib
import re
from pathlib import Path

import pytest
import recordings
from support import TO_BASE, frame_rows

from plumbing.cells import SECTION_PLAN
from plumbing.harness import lookup_peaks

TIME, READ, WRITTEN = "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
PAIR, FUSED = "a + b * c", "addcmul"
TENSOR = 4 * 2**25  # bytes: 2^25 float32 values
# What each version must read and write, in tensors: the pair's product reads b and c and writes t, the add reads a
# and t and writes the sum (4 read, 2 written); addcmul reads a, b and c and writes one (3 and 1).
MUST = {PAIR: (4, 2), FUSED: (3, 1)}
SHOWN = re.compile(
    r"fusing (cut|did not cut) DRAM traffic \(([\d,]+) MB unfused, ([\d,]+) MB fused: ([\d.]+)x\), and the unfused "
    r"pair took ([\d.]+)x the fused kernel's time"
)  # fmt: skip
# The section's display cell, swapped in before the section runs: it notes the PNG of each image displayed.
DISPLAY_SPY = """
import base64 as _base64, hashlib as _hashlib
_DISPLAYED_PNGS = []
_publish = get_ipython().display_pub.publish
def _spy(data, *args, **kwargs):
    if "image/png" in data:
        _png = data["image/png"]
        _DISPLAYED_PNGS.append(_hashlib.sha256(_base64.b64decode(_png) if isinstance(_png, str) else _png).hexdigest())
    return _publish(data, *args, **kwargs)
get_ipython().display_pub.publish = _spy
"""


@pytest.fixture(scope="module")
def fusion(ncu_recorded):
    """The recorded notebook with section 7 run, the images it displayed noted."""
    ncu_recorded.session.run(DISPLAY_SPY)
    ncu_recorded.section(7)
    return ncu_recorded


def rows(recorded) -> dict:
    return frame_rows(recorded, "fusion_frame", 2, 3)


def moved(measured: dict, region: str) -> float:
    return measured[region, READ] + measured[region, WRITTEN]


def analysis_sources(recorded) -> list[str]:
    """Section 7's own open and analysis cells, as the CPU run has them."""
    return [source for _, role, source in recordings.cpu_section_sources(recorded.cells, 7)
            if role == "analysis"]  # fmt: skip


def dram_peak(recorded) -> float:
    _, peaks = lookup_peaks(recorded.recording["provenance"]["gpu"])
    assert peaks, f"{recorded.recording['provenance']['gpu']} has no datasheet peaks in the harness's GPU_PEAKS"
    return peaks["dram_gbs"]


def test_section_7_runs_on_each_recording_and_prints_its_verdict(fusion):
    printed = fusion.section(7)
    gpu = fusion.recording["provenance"]["gpu"]
    assert f"On this {gpu}: fusing " in printed and SHOWN.search(printed), (
        f"section 7 printed no verdict line on {fusion.folder.name}; its last cell must call verdict(7, ...):\n"
        f"{printed[-1500:]}"
    )


def test_section_7s_first_call_printed_only_the_first_line_of_nsights_several_kernels_refusal(fusion):
    outputs = [fusion.recording["cells"][cell_id]["output"] for cell_id in SECTION_PLAN[7]["run"]]
    refusal = [line for output in outputs for line in output.splitlines() if "kernel is launched within" in line]
    assert refusal == [f"More than one (total=2) kernel is launched within the {PAIR} annotation."], (
        f"section 7's first call (no combine_kernel_metrics) should print the first line of nsight's RuntimeError "
        f"for the two kernels of {PAIR!r}; its run cells printed {outputs}: check the try/except of s7-error"
    )
    assert not any("We expect one kernel" in output for output in outputs), "it printed more than the first line"


def test_nsight_refuses_the_recorded_report_without_a_rule_and_add_kernels_gives_the_recorded_frame(fusion):
    fusion.section(7)
    fusion.session.run(
        "from nsight.extraction import extract_df_from_report as _extract\n"
        "_reports = sorted(__import__('pathlib').Path(out_prefix('s7_fusion')).glob('*.ncu-rep'))\n"
        "_runs = int(fusion_frame.NumRuns.iloc[0])\n"
        "try:\n"
        "    _extract(str(_reports[0]), FUSION_METRICS, [(FUSION_N,)], _runs, two_ways, None, None, QUIET)\n"
        "    _refusal = None\n"
        "except RuntimeError as _error:\n"
        "    _refusal = str(_error).splitlines()[0]\n"
        "_raw = _extract(str(_reports[0]), FUSION_METRICS, [(FUSION_N,)], _runs, two_ways, None, None, QUIET,\n"
        "                combine_kernel_metrics=add_kernels)\n"
        f"_raw = _raw.assign(base=_raw.Value * _raw.Unit.map({TO_BASE!r}))"
        ".groupby(['Annotation', 'Metric']).base.mean()\n"
    )
    assert fusion.value("len(_reports)") == 1, "the s7_fusion folder should hold the one report nsight wrote"
    assert fusion.value("_refusal") == f"More than one (total=2) kernel is launched within the {PAIR} annotation.", (
        "nsight-python no longer refuses the recorded two-kernel region without combine_kernel_metrics: the lesson "
        "of s7-error no longer holds"
    )
    summed = fusion.value("{'|'.join(k): v for k, v in _raw.items()}")
    summed = {tuple(key.split("|")): value for key, value in summed.items()}
    measured = rows(fusion)
    assert summed.keys() == measured.keys(), f"the report holds {sorted(summed)}, the frame {sorted(measured)}"
    for key, value in summed.items():
        assert measured[key] == pytest.approx(value, rel=1e-6), (
            f"{key}: the recorded frame's {measured[key]} is not the report's per-run sum over kernels ({value}): "
            "add_kernels (the shared define cell) must add a region's kernels' times and bytes"
        )


def test_section_7s_traffic_table_is_each_regions_recorded_time_and_bytes_and_what_it_must_move(fusion):
    fusion.section(7)
    measured = rows(fusion)
    table = fusion.value("traffic.to_dict(orient='index')")
    assert sorted(table) == sorted(MUST), f"the traffic table's rows are {sorted(table)}, not {sorted(MUST)}"
    for region, (reads, writes) in MUST.items():
        row = table[region]
        expected = {
            "time (us)": measured[region, TIME] * 1e6,
            "DRAM read (MB)": measured[region, READ] / 1e6,
            "DRAM written (MB)": measured[region, WRITTEN] / 1e6,
            "must move (MB)": (reads + writes) * TENSOR / 1e6,
        }
        for column, value in expected.items():
            assert row[column] == pytest.approx(value, rel=1e-6), (
                f"{region}: the traffic table's {column!r} is {row[column]}, but its own rows give {value:.1f}: check "
                "the row label, the metric and the unit factor of that column in the table cell of section 7"
            )


def test_section_7s_verdict_gives_the_measured_traffic_and_time_ratios(fusion):
    fusion.section(7)
    measured = rows(fusion)
    headline = fusion.value("SECTIONS[7]['headline']")
    shown = SHOWN.search(headline)
    assert shown, f"section 7's verdict names no traffic and time: {headline!r}"
    pair_mb, fused_mb = moved(measured, PAIR) / 1e6, moved(measured, FUSED) / 1e6
    assert shown[1] == ("cut" if pair_mb > fused_mb else "did not cut"), (
        f"the verdict says fusing {shown[1]!r} the traffic, but {pair_mb:.0f} MB unfused against {fused_mb:.0f} MB "
        f"fused: s7-verdict"
    )
    assert float(shown[2].replace(",", "")) == pytest.approx(pair_mb, abs=0.51), (
        f"the verdict's unfused traffic {shown[2]} MB is not {PAIR!r}'s DRAM read + written ({pair_mb:.1f} MB)"
    )
    assert float(shown[3].replace(",", "")) == pytest.approx(fused_mb, abs=0.51), (
        f"the verdict's fused traffic {shown[3]} MB is not {FUSED!r}'s DRAM read + written ({fused_mb:.1f} MB)"
    )
    assert float(shown[4]) == pytest.approx(pair_mb / fused_mb, abs=0.0051), (
        f"the verdict's traffic ratio {shown[4]}x is not {pair_mb / fused_mb:.2f} (unfused over fused): s7-verdict"
    )
    time_ratio = measured[PAIR, TIME] / measured[FUSED, TIME]
    assert float(shown[5]) == pytest.approx(time_ratio, abs=0.0051), (
        f"the verdict's time ratio {shown[5]}x is not {time_ratio:.2f} (unfused over fused time): s7-verdict"
    )


def test_section_7s_figure_is_addcmuls_dram_bytes_over_its_time(fusion):
    fusion.section(7)
    measured = rows(fusion)
    gbs = moved(measured, FUSED) / measured[FUSED, TIME] / 1e9
    figure = fusion.figure(7)
    assert (figure["unit"], figure["peak_kind"]) == ("GB/s", "dram_gbs") and FUSED in figure["name"], figure
    assert figure["value"] == pytest.approx(gbs, rel=1e-3), (
        f"section 7's figure is {figure['value']} GB/s, but addcmul's DRAM read + written over its time is "
        f"{gbs:.1f} GB/s: check the region, the bytes and the MB/us -> GB/s factor in s7-verdict"
    )
    assert 5 < 100 * gbs / dram_peak(fusion) <= 100, f"addcmul at {gbs:.0f} GB/s: outside 5-100% of the DRAM peak"


def test_section_7s_dram_bytes_are_what_each_version_must_move_and_fusion_moves_less_in_less_time(fusion):
    fusion.section(7)
    measured = rows(fusion)
    for region, (reads, writes) in MUST.items():
        read, written = measured[region, READ] / TENSOR, measured[region, WRITTEN] / TENSOR
        assert reads * 0.97 <= read <= reads * 1.10, (
            f"{region} read {read:.2f} tensors from DRAM; it must read {reads}: the wrong region's row or metric"
        )
        assert writes * 0.5 <= written <= writes * 1.03, (
            f"{region} wrote {written:.2f} tensors to DRAM; it must write {writes} (a few lines may stay in L2)"
        )
    assert moved(measured, FUSED) < moved(measured, PAIR) and measured[FUSED, TIME] < measured[PAIR, TIME], (
        "the fused kernel moved more bytes or took longer than the pair: the lesson (and its verdict) would not hold"
    )


def test_both_versions_stream_through_dram_at_nearly_the_same_rate_as_the_lesson_says(fusion):
    fusion.section(7)
    measured = rows(fusion)
    rates = {region: moved(measured, region) / measured[region, TIME] / 1e9 for region in MUST}
    assert rates[PAIR] == pytest.approx(rates[FUSED], rel=0.15), (
        f"the pair streams at {rates[PAIR]:.0f} GB/s, addcmul at {rates[FUSED]:.0f} GB/s: the reading after section "
        "7 says both stream at nearly the same rate, so the time falls with the bytes"
    )
    for region, rate in rates.items():
        assert 5 < 100 * rate / dram_peak(fusion) <= 100, f"{region} at {rate:.0f} GB/s: outside 5-100% of the peak"


def test_section_7s_bar_plot_is_nsights_png_in_the_s7_fusion_folder_and_is_displayed(fusion):
    fusion.section(7)
    plot = Path(fusion.value("out_prefix('s7_fusion') + FUSION_PICTURE"))
    out = Path(fusion.value("__import__('os').environ['NSPY_TUTORIAL_OUT']"))
    assert plot.parent == out / "s7_fusion" and plot.is_file(), (
        f"section 7's bar plot should be where @nsight.analyze.plot wrote it, in the s7_fusion folder: {plot}"
    )
    png = plot.read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and width > 100 and height > 100, f"{plot} is not a picture"
    assert hashlib.sha256(png).hexdigest() in fusion.value("_DISPLAYED_PNGS"), (
        "the table cell of section 7 did not display the bar plot nsight drew (display(..., Image(...FUSION_PICTURE)))"
    )


def test_section_7s_verdict_says_the_pair_took_less_time_and_no_cut_when_the_fused_kernel_is_slower_and_moves_more(
    fusion,
):
    """The same cells on the recording with addcmul's time made 1.5 x the pair's and its DRAM bytes twice the
    pair's: the numbers show neither a cut in time nor in traffic."""
    fusion.section(7)
    fusion.session.run(
        "import copy as _copy\n"
        "_saved = _copy.deepcopy(SECTIONS), _copy.deepcopy(FIGURES)\n"
        "try:\n"
        "    _time = fusion_frame.Metric == 'gpu__time_duration.sum'\n"
        "    _slow = fusion_frame.copy()\n"
        f"    _slow.loc[_time & (_slow.Annotation == {FUSED!r}), 'AvgValue'] = "
        f"1.5 * float(_slow.loc[_time & (_slow.Annotation == {PAIR!r}), 'AvgValue'].iloc[0])\n"
        "    for _bytes in ('dram__bytes_read.sum', 'dram__bytes_write.sum'):\n"
        "        _rows = _slow.Metric == _bytes\n"
        f"        _slow.loc[_rows & (_slow.Annotation == {FUSED!r}), 'AvgValue'] = "
        f"2 * float(_slow.loc[_rows & (_slow.Annotation == {PAIR!r}), 'AvgValue'].iloc[0])\n"
        "    _scratch = dict(globals(), fusion_frame=_slow)\n"
        f"    for _source in {analysis_sources(fusion)!r}:\n"
        "        exec(_source, _scratch)\n"
        "    _slow_headline = SECTIONS[7]['findings'][-1]\n"
        "finally:\n"
        "    SECTIONS.clear()\n"
        "    SECTIONS.update(_saved[0])\n"
        "    FIGURES[:] = _saved[1]\n"
    )
    headline = fusion.value("_slow_headline")
    shown = SHOWN.search(headline)
    assert shown and float(shown[5]) == pytest.approx(1 / 1.5, abs=0.01), (
        f"with addcmul 1.5x slower than the pair, the verdict must say the pair took 0.67x its time: {headline!r}"
    )
    assert shown[1] == "did not cut", f"with addcmul moving twice the pair's bytes, fusing cut nothing: {headline!r}"
