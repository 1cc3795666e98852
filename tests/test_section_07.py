"""Section 7, fusion in bytes, on the recorded rows, with the bytes each region must move counted here."""

from pytest import approx
from support import frame_rows, parse

TIME, READ, WRITTEN = "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
PAIR, FUSED = "a + b * c", "addcmul"
TENSOR = 4 * 2**25  # bytes: 2^25 float32 values
# In tensors: the pair's product reads b and c and writes t, its add reads a and t and writes the sum; addcmul
# reads a, b and c and writes one.
MUST = {PAIR: (4, 2), FUSED: (3, 1)}
VERDICT = "fusing {} traffic {}x, time {}x"  # DRAM bytes, then time: the pair over addcmul
FIX = "check section 7's table cell (time, read, written, moved) against the frame's rows and units"


def rows(recorded) -> dict:
    return frame_rows(recorded.bound(7)["fusion_frame"], 2, 3)  # seconds and bytes


def test_section_7s_traffic_table_is_each_regions_recorded_time_and_bytes_within_what_it_must_move(recorded):
    measured = rows(recorded)
    recorded.section(7)
    table = recorded.value("traffic.to_dict(orient='index')")
    for region, (reads, writes) in MUST.items():
        expected = {
            "time (ms)": measured[region, TIME] * 1e3,
            "read (MB)": measured[region, READ] / 1e6,
            "written (MB)": measured[region, WRITTEN] / 1e6,
            "moved (MB)": (measured[region, READ] + measured[region, WRITTEN]) / 1e6,
        }
        assert table[region] == approx(expected, rel=1e-6), f"{region}: {FIX}"
        assert reads * 0.97 <= measured[region, READ] / TENSOR <= reads * 1.1, f"{region} read what it must not"
        assert writes * 0.5 <= measured[region, WRITTEN] / TENSOR <= writes * 1.03, f"{region} wrote what it must not"


def test_section_7s_verdict_gives_the_measured_traffic_and_time_ratios(recorded):
    measured = rows(recorded)
    pair, fused = ((measured[r, READ] + measured[r, WRITTEN]) for r in (PAIR, FUSED))
    cut, less, longer = recorded.shown(7, VERDICT)
    assert cut == ("cut" if pair > fused else "did not cut"), "the verb follows the bytes moved"
    assert [less, longer] == approx([pair / fused, measured[PAIR, TIME] / measured[FUSED, TIME]], abs=0.0051)


def test_section_7s_verdict_says_fusing_did_not_cut_when_the_fused_kernel_moves_more(recorded):
    change = "fusion_frame = fusion_frame.copy()\n"
    change += f"_f, _p = fusion_frame.Annotation == {FUSED!r}, fusion_frame.Annotation == {PAIR!r}\n"
    for metric, factor in ((TIME, 1.5), (READ, 2), (WRITTEN, 2)):
        change += (
            f"_m = fusion_frame.Metric == {metric!r}\n"
            f"fusion_frame.loc[_f & _m, 'AvgValue'] = {factor} * fusion_frame.loc[_p & _m, 'AvgValue'].iloc[0]\n"
        )
    findings = recorded.altered(7, change)["findings"]
    cut, less, longer = parse(VERDICT, findings)
    assert (cut, less, longer) == ("did not cut", 0.5, approx(1 / 1.5, abs=0.01)), f"addcmul moves 2x: {findings}"
