"""tools/verified_table.py's rows: one line each, and no 'nan' figure (issue 45)."""

import json

import verified_table


def test_a_figure_that_is_not_a_number_reads_not_measured_never_nan():
    figure = {"name": "fp32 product", "value": float("nan"), "unit": "TFLOP/s", "pct_of_peak": None, "check": "ok"}
    assert verified_table.figure_text(figure) == "fp32 product: not measured"
    assert verified_table.figure_text({**figure, "value": 50.68}) == "fp32 product: 50.7 TFLOP/s (n/a)"


def test_readme_links_first_the_kept_run_with_the_most_sections_ok_and_its_run_all_time(tmp_path, monkeypatch):
    for name, ok, wall in (("h100-cupti", 5, 22), ("h100-ncu-2025.3.1-launch", 10, 300)):
        folder = tmp_path / "docs" / "verified" / name
        folder.mkdir(parents=True)
        environment = {"gpu": "NVIDIA H100", "profiler": "cupti" if ok == 5 else "ncu", "ncu_version": "2025.3.1"}
        environment |= {"ncu_mode": "launch: ..."} if ok == 10 else {}
        summary = {"environment": environment, "counts": {"ok": ok, "SKIPPED": 10 - ok}, "total_seconds": wall - 5}
        (folder / "summary.json").write_text(json.dumps({**summary, "created_utc": "2026-12-06"}))
        (folder / "run_info.json").write_text(json.dumps({"wall_seconds": wall}))
        (folder / "reading_page.ipynb").write_text("{}")
    monkeypatch.setattr(verified_table, "ROOT", tmp_path)
    link = verified_table.page_link()
    assert link.startswith(
        "[the notebook as it ran on an NVIDIA H100, measured with Nsight Compute 2025.3.1 in launch mode]"
    ), link
    assert "(docs/verified/h100-ncu-2025.3.1-launch/reading_page.ipynb)" in link and "took 300 s" in link, link


def test_readme_links_the_readers_page_before_anything_else_and_names_section_1s_download():
    readme = (verified_table.ROOT / "README.md").read_text()
    first = readme.split("](", 2)[1].split(")")[0]  # the Colab badge is an <a>, not a markdown link
    assert first.endswith("/reading_page.ipynb") and (verified_table.ROOT / first).is_file(), first
    assert "300 to 400 MB" in readme and "scripts/run_headless" in readme and "scripts/run_tests" in readme


def test_a_row_stays_one_line_and_only_readmes_table_lists_a_few_changed_cells(tmp_path, monkeypatch):
    def notebook(source):
        cells = [{"cell_type": "code", "id": f"c{n}", "source": [source], "outputs": []} for n in range(9)]
        return json.dumps({"cells": cells})

    (folder := tmp_path / "docs" / "verified" / "t4-cupti").mkdir(parents=True)
    summary = dict(environment={"gpu": "Tesla\nT4", "profiler": "cupti"}, counts={"ok": 1, "SKIPPED": 0}, figures=[])
    (folder / "summary.json").write_text(json.dumps(summary | {"total_seconds": 1.0, "created_utc": "2026-12-06"}))
    (folder / "run_info.json").write_text(json.dumps({"commit": "abcdef0" * 5, "wall_seconds": 2}))
    (folder / verified_table.NOTEBOOK.name).write_text(notebook("ran"))
    (today := tmp_path / verified_table.NOTEBOOK.name).write_text(notebook("edited since"))
    monkeypatch.setattr(verified_table, "ROOT", tmp_path)
    monkeypatch.setattr(verified_table, "NOTEBOOK", today)
    wide, narrow = (verified_table.table(wide=is_wide).splitlines() for is_wide in (True, False))
    assert len(wide) == 3 and wide[2].startswith("| Tesla T4 |"), f"a newline in a GPU's name ended the row: {wide}"
    for lines in (wide, narrow):  # header, rule and row of as many cells, or markdown shows no table
        assert len({line.count("|") for line in lines}) == 1, lines
    assert wide[2].endswith(f"| since abcdef0: {', '.join(f'c{n}' for n in range(9))} |"), wide
    short = "since abcdef0: c0, c1, c2, c3, c4, c5, and 3 more (all in docs/maintainers.md)"
    assert narrow[2].endswith(f"| {short} |"), f"README's table lists six changed cells and a count: {narrow}"


def test_pages_that_lost_a_tables_markers_are_refused_and_left_as_they_were(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(verified_table, "ROOT", tmp_path)
    (readme := tmp_path / "README.md").write_text("the markers were deleted\n")
    assert verified_table.main([]) == 1 and readme.read_text() == "the markers were deleted\n"
    assert "holds the markers" in capsys.readouterr().err, "name the markers no page holds"
