"""tools/keep_run.py: a run's output folder kept in docs/verified/<gpu>-<profiler>/, whole or not at all."""

import json
import lzma
import shutil

import keep_run
import pytest
import reading_page
from support import ROOT

ENVIRONMENT = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.1", "profiler": "ncu", "ncu_version": "2025.3.1"}


def run_folder(tmp_path, environment):
    out = tmp_path / "out"
    (out / "s10_softmax").mkdir(parents=True)
    (out / "s10_softmax" / "ncu-output-softmax_rows-0.ncu-rep").write_bytes(b"report" * 100)
    (out / "s10_softmax" / "processed_data-softmax_rows-0.csv").write_text("a,b\n")
    (out / ".nspy_tutorial_out").write_text("mark")
    (out / "cupti13" / "nvidia").mkdir(parents=True)
    (out / "cupti13" / "nvidia" / "libcupti.so.13").write_bytes(b"library")  # section 9's %pip --target
    executed = next(ROOT.glob("docs/verified/*/nsight_python_t4_tutorial.ipynb"))  # a real run's
    shutil.copy(executed, out / executed.name)
    (out / "summary.json").write_text(json.dumps({"environment": environment}))
    (out / "run_info.json").write_text(json.dumps({"commit": "a" * 40, "started_utc": "2026-12-06T19:30:00Z"}))
    return out


@pytest.mark.parametrize(
    ("mode", "folder"),
    [
        ({"ncu_mode": "launch: ..."}, "nvidia-h100-80gb-hbm3-ncu-2025.3.1-launch"),
        ({}, "nvidia-h100-80gb-hbm3-ncu-2025.3.1"),
        ({"profiler": "cupti"}, "nvidia-h100-80gb-hbm3-cupti"),
    ],
)
def test_a_run_is_kept_in_a_folder_named_by_its_gpu_and_profiler_with_nsights_files_and_what_ran(
    tmp_path, mode, folder
):
    out = run_folder(tmp_path, {**ENVIRONMENT, **mode})
    dest = keep_run.keep(out, "recording/run_launch_mode", tmp_path / "verified")
    assert dest.name == folder
    report = dest / "s10_softmax" / "ncu-output-softmax_rows-0.ncu-rep.xz"
    assert lzma.decompress(report.read_bytes()) == b"report" * 100, "an .ncu-rep is kept xz-compressed"
    assert (dest / "s10_softmax" / "processed_data-softmax_rows-0.csv").is_file(), "nsight's CSVs are kept"
    run_info = json.loads((dest / "run_info.json").read_text())
    assert run_info["commit"] == "a" * 40 and run_info["gpu"] == ENVIRONMENT["gpu"]
    assert run_info["command"] == "recording/run_launch_mode" and not (dest / ".nspy_tutorial_out").exists()
    assert not (dest / "cupti13").exists(), "section 9's installed packages are no evidence: keep them out"
    page = (dest / "reading_page.ipynb").read_text()
    assert page == reading_page.page_text(dest), "the page written must be the one reading_page.py makes"
    assert "(`recording/run_launch_mode`)" in page, "the page names the command"


def test_a_folder_that_is_no_finished_run_is_refused_and_the_old_evidence_stays(tmp_path):
    out = run_folder(tmp_path, ENVIRONMENT)
    (out / "summary.json").unlink()
    (old := tmp_path / "verified" / "nvidia-h100-80gb-hbm3-ncu-2025.3.1").mkdir(parents=True)
    with pytest.raises(SystemExit, match="lacks summary.json"):
        keep_run.keep(out, "scripts/run_headless", tmp_path / "verified")
    assert old.is_dir() and [p.name for p in (tmp_path / "verified").iterdir()] == [old.name]
