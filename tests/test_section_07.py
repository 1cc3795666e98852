"""Section 7, fusion in bytes, against the recorded rows and report with the bytes counted here (ncu recordings)."""

import base64
from pathlib import Path

from pytest import approx
from support import TO_BASE, frame_rows, parse

TIME, READ, WRITTEN = "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
PAIR, FUSED = "a + b * c", "addcmul"
TENSOR = 4 * 2**25  # bytes: 2^25 float32 values
# In tensors: the pair's product reads b and c and writes t, its add reads a and t and writes the sum; addcmul
# reads a, b and c and writes one.
MUST = {PAIR: (4, 2), FUSED: (3, 1)}
VERDICT = (
    "fusing {} DRAM traffic ({} MB unfused, {} MB fused: {}x), and the unfused pair took {}x the fused kernel's time"
)
REFUSAL = f"More than one (total=2) kernel is launched within the {PAIR} annotation."


def rows(recorded) -> dict:
    return frame_rows(recorded.bound(7)["fusion_frame"], 2, 3)


def test_nsight_refuses_the_recorded_report_without_a_rule_and_add_kernels_gives_the_recorded_frame(recorded):
    recorded.section(7)
    recorded.session.run(
        "from nsight.extraction import extract_df_from_report as _extract\n"
        "_report = str(next(__import__('pathlib').Path(out_prefix('s7_fusion')).glob('*.ncu-rep')))\n"
        "_runs = int(fusion_frame.NumRuns.iloc[0])\n"
        "_args = (_report, FUSION_METRICS, [(FUSION_N,)], _runs, two_ways, None, None, QUIET)\n"
        "try:\n    _extract(*_args)\n    _refusal = None\n"
        "except RuntimeError as _error:\n    _refusal = str(_error).splitlines()[0]\n"
        "_raw = _extract(*_args, combine_kernel_metrics=add_kernels)\n"
        f"_raw = _raw.assign(base=_raw.Value * _raw.Unit.map({TO_BASE!r}))"
        ".groupby(['Annotation', 'Metric']).base.mean()"
    )
    assert recorded.value("_refusal") == REFUSAL, "nsight no longer refuses the two-kernel region: s7-error's lesson"
    summed = recorded.value("{'|'.join(k): v for k, v in _raw.items()}")
    summed = {tuple(key.split("|")): value for key, value in summed.items()}
    assert summed == approx(rows(recorded), rel=1e-6), "add_kernels must add a region's kernels' times and bytes"


def test_section_7s_traffic_table_is_each_regions_recorded_time_and_bytes_and_what_it_must_move(recorded):
    measured = rows(recorded)
    recorded.section(7)
    table = recorded.value("traffic.to_dict(orient='index')")
    for region, (reads, writes) in MUST.items():
        expected = {
            "time (us)": measured[region, TIME] * 1e6,
            "DRAM read (MB)": measured[region, READ] / 1e6,
            "DRAM written (MB)": measured[region, WRITTEN] / 1e6,
            "must move (MB)": (reads + writes) * TENSOR / 1e6,
        }
        assert table[region] == approx(expected, rel=1e-6), f"{region}: check each column's row, metric and unit"
        assert reads * 0.97 <= measured[region, READ] / TENSOR <= reads * 1.1, f"{region} read what it must not"
        assert writes * 0.5 <= measured[region, WRITTEN] / TENSOR <= writes * 1.03, f"{region} wrote what it must not"


def test_section_7s_verdict_and_figure_give_the_measured_traffic_and_time(recorded):
    measured = rows(recorded)
    pair_mb, fused_mb = ((measured[r, READ] + measured[r, WRITTEN]) / 1e6 for r in (PAIR, FUSED))
    cut, *shown = recorded.shown(7, VERDICT)
    expected = [pair_mb, fused_mb, pair_mb / fused_mb, measured[PAIR, TIME] / measured[FUSED, TIME]]
    assert cut == ("cut" if pair_mb > fused_mb else "did not cut"), "the verb follows the MB moved"
    assert shown == approx(expected, abs=0.51) and shown[2:] == approx(expected[2:], abs=0.0051), "MB and ratios"
    gbs = fused_mb * 1e6 / measured[FUSED, TIME] / 1e9
    recorded.check_figure(7, "addcmul DRAM bandwidth", gbs, "GB/s", "dram_gbs")


def test_section_7s_verdict_says_no_cut_and_the_time_ratio_when_the_fused_kernel_is_slower_and_moves_more(recorded):
    change = "fusion_frame = fusion_frame.copy()\n"
    change += f"_f, _p = fusion_frame.Annotation == {FUSED!r}, fusion_frame.Annotation == {PAIR!r}\n"
    for metric, factor in ((TIME, 1.5), (READ, 2), (WRITTEN, 2)):
        change += (
            f"_m = fusion_frame.Metric == {metric!r}\n"
            f"fusion_frame.loc[_f & _m, 'AvgValue'] = {factor} * fusion_frame.loc[_p & _m, 'AvgValue'].iloc[0]\n"
        )
    findings = recorded.altered(7, change)["findings"]
    cut, *_, time_ratio = parse(VERDICT, findings)
    assert (cut, time_ratio) == ("did not cut", approx(1 / 1.5, abs=0.01)), f"addcmul moves 2x in 1.5x: {findings}"


def test_section_7s_bar_plot_is_nsights_png_in_the_s7_fusion_folder_and_is_displayed(recorded):
    recorded.section(7)
    plot = Path(recorded.value("out_prefix('s7_fusion') + FUSION_PICTURE"))
    assert plot.parent == recorded.out / "s7_fusion" and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", plot
    assert plot.read_bytes() in map(base64.b64decode, recorded.pngs), "section 7 must display the bar plot nsight drew"
