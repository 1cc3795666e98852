"""Section 9, CUPTI in a child against section 5's sweep: table and verdict against both recordings (ncu)."""

from pytest import approx

VERDICT = (
    "CUPTI's times were {}-{}x of Nsight Compute's at n={} and {}-{}x at n={}; its calls took {} s in the child, "
    "section 5's {} s"
)


def recorded_times(recorded) -> dict:
    """{(annotation, n): (CUPTI ns, section 5's ns)} from what the two run cells bound."""
    sweep = recorded.bound(5)["sweep_frame"]
    sweep = sweep[sweep.Metric == "gpu__time_duration.sum"]
    assert set(sweep.Unit) == {"ns"}, f"section 5's times are in {set(sweep.Unit)}, not ns"
    section_5 = {(row.Annotation, row.n): row.AvgValue for row in sweep.itertuples()}
    cupti = {(row["Annotation"], row["n"]): row["AvgValue"] for row in recorded.bound(9)["cupti_result"]["rows"]}
    assert cupti.keys() == section_5.keys(), f"CUPTI timed {sorted(cupti)}, section 5 {sorted(section_5)}"
    return {key: (cupti[key], section_5[key]) for key in cupti}


def test_section_9s_table_puts_each_cupti_row_beside_section_5s_time_for_the_same_region_and_size(recorded):
    times = recorded_times(recorded)
    recorded.section(9)
    rows = recorded.value("both.reset_index().to_dict('records')")
    shown = {(r["Annotation"], r["n"]): [r["CUPTI AvgValue"], r["section 5"], r["CUPTI / section 5"]] for r in rows}
    expected = {key: [cupti, section_5, cupti / section_5] for key, (cupti, section_5) in times.items()}
    assert shown == approx(expected, rel=1e-9), "CUPTI's and section 5's time of one region and size, and the ratio"


def test_section_9s_verdict_gives_the_time_ratios_at_the_smallest_and_largest_size_and_both_wall_times(recorded):
    ratios = {key: cupti / section_5 for key, (cupti, section_5) in recorded_times(recorded).items()}
    smallest, largest = min(n for _, n in ratios), max(n for _, n in ratios)
    expected = []
    for n in (smallest, largest):
        at_n = [ratio for (_, size), ratio in ratios.items() if size == n]
        expected += [min(at_n), max(at_n), n]
    bound = {**recorded.bound(5), **recorded.bound(9)}
    walls = [bound["cupti_result"]["wall_s"], bound["sweep_wall_s"]]
    shown = recorded.shown(9, VERDICT)
    assert shown[:6] == approx(expected, abs=0.0051), "CUPTI / section 5's lowest and highest at each end's size"
    assert shown[6:] == approx(walls, abs=0.051), "the child's wall time, then section 5's"


def test_section_9s_two_measurements_of_one_kernel_agree_within_physical_bounds(recorded):
    times = recorded_times(recorded)
    ratios = {key: cupti / section_5 for key, (cupti, section_5) in times.items()}
    assert all(0.5 < ratio < 1.5 and (n < 4096 or abs(ratio - 1) < 0.1) for (_, n), ratio in ratios.items()), ratios
    assert recorded.bound(9)["cupti_result"]["wall_s"] > 5 * sum(cupti for cupti, _ in times.values()) / 1e9
