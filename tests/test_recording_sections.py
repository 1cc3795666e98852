"""What a recording says of each section it recorded: the page and README's table read this, not printed text."""

import recordings


def test_a_section_whose_cell_raised_is_recorded_failed_naming_the_cell():
    entry = recordings.section_entry(8, {8: {"status": "ok", "headline": "h"}}, {8: "s8-reasons"}, {}, "c" * 40, "t")
    assert entry["status"] == "FAILED" and entry["failed_cell"] == "s8-reasons", (
        f"a section with a raising cell must be FAILED and name the cell, whatever its status cell said: {entry}"
    )
    assert "s8-reasons" in entry["reason"], f"the reason must name the cell that failed: {entry['reason']!r}"


def test_a_section_keeps_the_status_and_headline_its_own_cells_recorded():
    entry = recordings.section_entry(3, {3: {"status": "ok", "headline": "spread"}}, {}, {"wall_s": 1.5}, "c", "t")
    assert (entry["status"], entry["headline"], entry["failed_cell"]) == ("ok", "spread", None), entry
    assert entry["cost"] == {"wall_s": 1.5} and entry["notebook_commit"] == "c", entry


def test_a_section_whose_status_cell_never_ran_is_not_run():
    entry = recordings.section_entry(5, {}, {}, {}, "c", "t")
    assert entry["status"] == "NOT RUN", f"no status and no failure means the section did not finish: {entry}"


def test_the_ncu_recorder_on_a_machine_without_a_gpu_says_so_and_writes_nothing(tmp_path):
    import os
    import subprocess
    import sys

    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")  # a driver tool that finds no GPU
    (fake_bin / "nvidia-smi").chmod(0o755)
    dest = tmp_path / "dest"
    environ = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, str(recordings.ROOT / "scripts" / "record_ncu.py"), "--dest", str(dest), "--sections", "2"],
        capture_output=True, text=True, env=environ, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "no NVIDIA GPU here" in done.stderr, (
        f"record_ncu.py without a GPU must stop with exit 2 and say so, not a traceback: {done.returncode} "
        f"{done.stderr[-600:]}"
    )
    assert "Traceback" not in done.stderr and not dest.exists(), "nothing may be written for a recording never made"
