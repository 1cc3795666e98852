"""Section 9, CUPTI in a child process against section 5's sweep: the `both` table and the verdict against the rows
both recorded under Nsight Compute (without it the section is SKIPPED: there is nothing to compare against)."""

import re

import pytest

TIME = "gpu__time_duration.sum"
VERDICT = re.compile(
    r"CUPTI's times were (?P<lo0>[\d.]+)-(?P<hi0>[\d.]+)x of (?P<other>.+?) at n=(?P<n0>\d+) and "
    r"(?P<lo1>[\d.]+)-(?P<hi1>[\d.]+)x at n=(?P<n1>\d+); its calls took (?P<child>[\d.]+) s in the child, "
    r"section 5's (?P<sweep>[\d.]+) s"
)


def recorded_times(ncu_recorded) -> dict:
    """{(annotation, n): (CUPTI ns, section 5's ns)} from what the two run cells bound."""
    variables = ncu_recorded.recording["variables"]
    sweep = variables["sweep_frame"]
    sweep = sweep[sweep.Metric == TIME]
    assert set(sweep.Unit) == {"ns"}, f"section 5's {TIME} rows are in {set(sweep.Unit)}, not ns"
    section_5 = {(row.Annotation, row.n): row.AvgValue for row in sweep.itertuples()}
    cupti = {(row["Annotation"], row["n"]): row["AvgValue"] for row in variables["cupti_result"]["rows"]}
    assert cupti.keys() == section_5.keys(), f"CUPTI timed {sorted(cupti)}, section 5 {sorted(section_5)}"
    return {key: (cupti[key], section_5[key]) for key in cupti}


def run_sections(ncu_recorded) -> str:
    ncu_recorded.section(5)  # section 9 reads section 5's sweep_frame and sweep_wall_s
    return ncu_recorded.section(9)


def test_section_9_runs_on_each_recording_and_prints_its_verdict(ncu_recorded):
    printed = run_sections(ncu_recorded)
    gpu = ncu_recorded.recording["provenance"]["gpu"]
    assert f"On this {gpu}: CUPTI's times were " in printed, (
        f"section 9 printed no verdict line on {ncu_recorded.folder.name}; its verdict cell must call verdict(9, ...):"
        "\n"
        f"{printed[-1500:]}"
    )


def test_section_9s_table_puts_each_cupti_row_beside_section_5s_time_for_the_same_region_and_size(ncu_recorded):
    run_sections(ncu_recorded)
    rows = ncu_recorded.value("both.reset_index().to_dict('records')")
    times = recorded_times(ncu_recorded)
    assert {(row["Annotation"], row["n"]) for row in rows} == set(times), f"the comparison table's rows: {rows}"
    for row in rows:
        cupti, section_5 = times[row["Annotation"], row["n"]]
        assert row["CUPTI AvgValue"] == pytest.approx(cupti, rel=1e-9), f"the comparison's CUPTI column: {row}"
        assert row["section 5"] == pytest.approx(section_5, rel=1e-9), (
            f"{row['Annotation']} n={row['n']}: the comparison's 'section 5' is {row['section 5']}, but section 5 "
            f"timed {section_5} ns there: check s9-compare's metric filter and index"
        )
        assert row["CUPTI / section 5"] == pytest.approx(cupti / section_5, rel=1e-9), (
            f"the comparison's ratio should be CUPTI's time over section 5's: {row}"
        )


def test_section_9s_verdict_gives_the_time_ratios_at_the_smallest_and_largest_size_and_both_wall_times(ncu_recorded):
    run_sections(ncu_recorded)
    text = ncu_recorded.value("SECTIONS[9]['headline']")
    shown = VERDICT.search(text)
    assert shown, f"section 9's verdict does not read as the ratios at two sizes and two wall times: {text!r}"
    ratios = {key: cupti / section_5 for key, (cupti, section_5) in recorded_times(ncu_recorded).items()}
    sizes = sorted({n for _, n in ratios})
    for end, n in (("0", sizes[0]), ("1", sizes[-1])):
        at_n = [ratio for (_, size), ratio in ratios.items() if size == n]
        assert int(shown[f"n{end}"]) == n, f"the verdict's sizes must be the smallest and largest, {sizes}: {text!r}"
        assert float(shown[f"lo{end}"]) == pytest.approx(min(at_n), abs=0.0051), (
            f"at n={n} the lowest CUPTI / section 5 ratio is {min(at_n):.2f}: {text!r} (s9-verdict)"
        )
        assert float(shown[f"hi{end}"]) == pytest.approx(max(at_n), abs=0.0051), (
            f"at n={n} the highest CUPTI / section 5 ratio is {max(at_n):.2f}: {text!r} (s9-verdict)"
        )
    measured_by, not_by = (
        ("Nsight Compute", "CUPTI") if ncu_recorded.recording["mode"] == "ncu" else ("CUPTI", "Nsight")
    )
    assert measured_by in shown["other"] and not_by not in shown["other"], (
        f"section 5 measured with {measured_by} on {ncu_recorded.folder.name}, but the verdict compares with "
        f"{shown['other']!r} (s9-verdict)"
    )
    variables = ncu_recorded.recording["variables"]
    child, sweep = variables["cupti_result"]["wall_s"], variables["sweep_wall_s"]
    assert float(shown["child"]) == pytest.approx(child, abs=0.051), f"the child took {child:.1f} s: {text!r}"
    assert float(shown["sweep"]) == pytest.approx(sweep, abs=0.051), f"section 5 took {sweep:.1f} s: {text!r}"


def test_section_9s_two_measurements_of_one_kernel_agree_within_physical_bounds(ncu_recorded):
    times = recorded_times(ncu_recorded)
    for (where, n), (cupti, section_5) in times.items():
        assert 0.5 < cupti / section_5 < 1.5, f"{where} n={n}: CUPTI {cupti} ns against section 5's {section_5} ns"
        if n >= 4096:  # the kernel dominates: cache flushes and replays add little to a multi-us product
            assert cupti / section_5 == pytest.approx(1, abs=0.1), f"{where} n={n}: {cupti} against {section_5}"
    for n in sorted({n for _, n in times}):
        if n >= 1024:
            assert times["float16", n][0] < times["float32", n][0], f"fp16 not faster than fp32 at n={n}: {times}"
    variables = ncu_recorded.recording["variables"]
    kernels_s = 5 * sum(cupti for cupti, _ in times.values()) / 1e9  # the child runs each size 5 times
    assert variables["cupti_result"]["wall_s"] > kernels_s, "the child's wall time is shorter than its kernels"
    assert variables["sweep_wall_s"] > 5 * sum(section_5 for _, section_5 in times.values()) / 1e9
