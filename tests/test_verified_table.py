"""tools/verified_table.py's rows: one line each, and no 'nan' figure (issue 45)."""

import json

import verified_table


def test_a_figure_that_is_not_a_number_reads_not_measured_never_nan():
    figure = {"name": "fp32 product", "value": float("nan"), "unit": "TFLOP/s", "pct_of_peak": None, "check": "ok"}
    assert verified_table.figure_text(figure) == "fp32 product: not measured"
    assert verified_table.figure_text({**figure, "value": 50.68}) == "fp32 product: 50.7 TFLOP/s (n/a)"


def test_a_gpu_name_holding_a_newline_stays_in_one_row(tmp_path, monkeypatch):
    folder = tmp_path / "docs" / "verified" / "t4-cupti"
    folder.mkdir(parents=True)
    summary = {
        "environment": {"gpu": "Tesla\nT4", "profiler": "cupti"},
        "counts": {"ok": 1, "SKIPPED": 0},
        "total_seconds": 1.0,
        "created_utc": "2026-12-06",
        "figures": [],
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "run_info.json").write_text(json.dumps({"commit": "a" * 40, "wall_seconds": 2}))
    (folder / verified_table.NOTEBOOK.name).write_text(verified_table.NOTEBOOK.read_text())
    monkeypatch.setattr(verified_table, "ROOT", tmp_path)
    rows = verified_table.table(tmp_path).splitlines()[2:]
    assert len(rows) == 1 and rows[0].startswith("| Tesla T4 |"), rows
