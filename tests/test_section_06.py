"""Section 6, counters against bytes, on the recorded rows with the bytes each kernel must move counted here."""

from pytest import approx
from support import frame_rows, parse

TIME, SM = "gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
MATMUL, STREAM, SOFTMAX = "fp16 matmul", "x * 2.0", "softmax"
# Bytes read and written once each: an fp16 4096 x 4096 product reads two operands and writes one (2 bytes an
# element); x * 2.0 reads and writes 2^26 float32 values; the softmax reads and writes an 8192 x 1024 float32 matrix.
MUST_MOVE = {MATMUL: 3 * 4096 * 4096 * 2, STREAM: 2 * 2**26 * 4, SOFTMAX: 2 * 8192 * 1024 * 4}
VERDICT = "the softmax ran at {}% of x * 2.0's GB/s; its larger counter: {}"
FIX = "check section 6's table cell (time, SM %, DRAM %, must-move GB/s) against the frame's rows and units"


def measured(recorded) -> dict:
    return frame_rows(recorded.bound(6)["bound_frame"], 3, 3)  # seconds and percentages


def test_section_6s_table_is_each_kernels_time_counters_and_must_move_rate_from_its_own_rows(recorded):
    rows = measured(recorded)
    recorded.section(6)
    table = recorded.value("bound.to_dict(orient='index')")
    assert sorted(table) == sorted(MUST_MOVE), f"the table's rows are {sorted(table)}, not the three regions"
    for region, moved in MUST_MOVE.items():
        seconds = rows[region, TIME]
        expected = {"time (ns)": seconds * 1e9, "SM %": rows[region, SM], "DRAM %": rows[region, DRAM]}
        expected["must-move GB/s"] = moved / seconds / 1e9
        assert table[region] == approx(expected, rel=1e-6), f"{region}: {FIX}"
    stream_gbs = MUST_MOVE[STREAM] / rows[STREAM, TIME] / 1e9
    assert 0.5 < stream_gbs / recorded.peaks()["dram_gbs"] < 1.0, "x * 2.0 streams at a physical share of DRAM peak"


def test_section_6s_verdict_gives_the_softmaxs_share_of_the_streams_rate_and_its_larger_counter(recorded):
    rows = measured(recorded)
    share, larger = recorded.shown(6, VERDICT)
    rate = {region: MUST_MOVE[region] / rows[region, TIME] for region in (STREAM, SOFTMAX)}
    assert share == approx(100 * rate[SOFTMAX] / rate[STREAM], abs=0.51), "the share is bytes over time, both kernels"
    assert larger == ("SM %" if rows[SOFTMAX, SM] > rows[SOFTMAX, DRAM] else "DRAM %"), "the softmax's larger counter"
    recorded.check_figure(6, "x * 2.0, bytes it must move / time", rate[STREAM] / 1e9, "GB/s", "dram_gbs")


def test_section_6s_verdict_names_dram_when_the_softmaxs_dram_counter_is_the_larger(recorded):
    change = (
        "bound_frame = bound_frame.copy()\n"
        f"_soft = (bound_frame.Annotation == {SOFTMAX!r})\n"
        f"bound_frame.loc[_soft & (bound_frame.Metric == {DRAM!r}), 'AvgValue'] = 99.0\n"
        f"bound_frame.loc[_soft & (bound_frame.Metric == {SM!r}), 'AvgValue'] = 1.0\n"
    )
    findings = recorded.altered(6, change)["findings"]
    assert parse(VERDICT, findings)[1] == "DRAM %", f"the softmax's DRAM % is the larger now: {findings}"
