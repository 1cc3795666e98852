"""The notebook's folded harness and setup-helper cells, executed in a real kernel, behave as the sections rely on."""

from __future__ import annotations

import json
import os
import stat

import pytest
from conftest import cell_by_id
from kernel_session import CellError, KernelSession


@pytest.fixture
def out_dir(tmp_path):
    return tmp_path / "out"


@pytest.fixture
def helpers(notebook, out_dir, tmp_path):
    """A fresh kernel that has run the notebook's own harness and setup-helper cells, writing to a temporary folder."""
    with KernelSession(env={"NSPY_TUTORIAL_OUT": str(out_dir)}, cwd=tmp_path) as session:
        session.run(cell_by_id(notebook, "harness").source)
        session.run(cell_by_id(notebook, "setup-helpers").source)
        yield session


def test_helper_cell_creates_and_reports_the_output_folder(helpers, out_dir):
    assert out_dir.is_dir(), "the helper cell must create OUT_DIR"
    assert helpers.value("str(OUT_DIR)") == str(out_dir.resolve())


def test_ncu_version_is_parsed_from_the_version_line(helpers):
    text = "NVIDIA (R) Nsight Compute Command Line Profiler\\nCopyright (c) 2018-2026\\nVersion 2026.3.1.0 (build 1)"
    assert helpers.value(f"parse_ncu_version({text!r})") == [2026, 3, 1]
    assert helpers.value("parse_ncu_version('ncu: command not found')") is None


@pytest.mark.parametrize(
    ("version", "recent"),
    [((2026, 2, 1), True), ((2026, 3, 1), True), ((2027, 1, 0), True), ((2026, 2, 0), False), ((2025, 3, 1), False)],
)
def test_ncu_threshold_is_2026_2_1(helpers, version, recent):
    assert helpers.value(f"ncu_is_recent({version!r})") is recent
    assert helpers.value("ncu_is_recent(None)") is False


def test_ncu_path_folder_is_searched_before_path(helpers, tmp_path):
    fake = tmp_path / "ncu_dir" / "ncu"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'NVIDIA (R) Nsight Compute'\necho 'Version 2026.2.1.0 (build 7)'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    found = helpers.value(f"[str(p) for p in ncu_candidates({{'NCU_PATH': {str(fake.parent)!r}, 'PATH': ''}})]")
    assert found == [str(fake)]
    assert helpers.value(f"ncu_version_of({str(fake)!r})") == [2026, 2, 1]


@pytest.mark.parametrize(
    ("gpu", "label", "fp16"),
    [("Tesla T4", "T4", 65.0), ("NVIDIA L4", "L4", 121.0), ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 312.0),
     ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.0), ("NVIDIA H200", "H200 SXM", 989.0)],
)  # fmt: skip
def test_peaks_are_found_for_known_gpus(helpers, gpu, label, fp16):
    found_label, peaks = helpers.value(f"lookup_peaks({gpu!r})")
    assert (found_label, peaks["fp16_tflops"]) == (label, fp16)


@pytest.mark.parametrize("gpu", ["NVIDIA GeForce RTX 4090", "NVIDIA H200 NVL", "NVIDIA H100 PCIe", "", None])
def test_unknown_gpus_get_no_peaks_rather_than_another_gpus(helpers, gpu):
    assert helpers.value(f"lookup_peaks({gpu!r})") == [None, None]


def test_figures_on_an_unknown_gpu_read_na_and_are_not_judged(helpers):
    helpers.run(
        "ENVIRONMENT['gpu'] = 'NVIDIA GeForce RTX 4090'\nfig = record_figure(5, 'x', 50.0, 'TFLOP/s', 'fp16_tflops')"
    )
    assert helpers.value("fig['check']") == "unchecked" and helpers.value("fig['pct_of_peak']") is None
    assert "n/a" in helpers.value("describe_figure(fig)")


@pytest.mark.parametrize(
    ("value", "check"), [(4900.0, "SUSPECT"), (4000.0, "ok"), (100.0, "SUSPECT"), (float("nan"), "SUSPECT")]
)
def test_figures_above_peak_or_below_the_floor_are_suspect(helpers, value, check):
    helpers.run("ENVIRONMENT['gpu'] = 'NVIDIA H200'")
    assert helpers.value(f"record_figure(3, 'add', float({str(value)!r}), 'GB/s', 'dram_gbs')['check']") == check


@pytest.mark.parametrize(
    ("environ", "on_colab", "expected"),
    [({"NSPY_TUTORIAL_OUT": "/tmp/custom"}, True, "/tmp/custom"), ({}, True, "/content/nspy_tutorial")],
)
def test_output_folder_is_env_override_then_colab_default(helpers, environ, on_colab, expected):
    assert helpers.value(f"str(choose_output_dir({environ!r}, on_colab={on_colab}))") == expected


def test_output_folder_off_colab_is_local(helpers, tmp_path):
    assert helpers.value("str(choose_output_dir({}, on_colab=False))") == str(tmp_path / "nspy_tutorial_out")


def test_profiler_choice_defaults_to_auto_and_rejects_typos(helpers):
    assert helpers.value("read_profiler_choice({})") == "auto"
    assert helpers.value("read_profiler_choice({'NSPY_TUTORIAL_PROFILER': ' CUPTI '})") == "cupti"
    with pytest.raises(CellError) as raised:
        helpers.run("read_profiler_choice({'NSPY_TUTORIAL_PROFILER': 'nsys'})")
    assert raised.value.ename == "ValueError" and "auto, ncu, cupti" in raised.value.evalue


def _open(number, title="s", skip_reason=None):
    """What a section's folded opener cell runs."""
    return f"# @title Section {number}\nbegin_section({number}, {title!r}, skip_reason={skip_reason!r})"


def test_a_raising_cell_fails_its_section_and_the_next_section_still_runs(helpers):
    helpers.run(_open(2, "two"))
    output = helpers.run("raise ZeroDivisionError('first line\\nsecond line')")  # no CellError: Run all goes on
    assert "Section 2 FAILED: ZeroDivisionError: first line" in output, output
    after = helpers.run("print('MUST NOT RUN')")
    assert "MUST NOT RUN" not in after and "not run: section 2 FAILED" in after
    helpers.run(_open(3, "three"))
    assert helpers.run("print(6 * 7)").strip() == "42", "a section after a FAILED one must run normally"
    sections = helpers.value("SECTIONS")
    assert sections["2"]["status"] == "FAILED" and sections["2"]["reason"] == "ZeroDivisionError: first line"
    assert sections["3"]["status"] == "ok"


def test_guarded_cells_keep_their_names_and_show_their_last_value(helpers):
    helpers.run(_open(2))
    helpers.run("def scaled(x):\n    return 3 * x\n\nresult = scaled(14)")
    assert helpers.value("result") == 42 and helpers.value("scaled.__name__") == "scaled"


def test_a_skipped_section_runs_none_of_its_cells_and_says_so_once(helpers):
    opened = helpers.run(_open(4, "four", skip_reason="needs Nsight Compute"))
    assert opened.count("SKIPPED") == 1 and "see the banner" in opened
    assert helpers.run("print('MUST NOT RUN')") == "", "cells of a SKIPPED section print nothing and run nothing"
    section = helpers.value("SECTIONS[4]")
    assert (section["status"], section["reason"], section["environment_limit"]) == (
        "SKIPPED", "needs Nsight Compute", True
    )  # fmt: skip


def test_errors_after_the_last_section_stop_run_all(helpers):
    helpers.run(_open(10) + "\nend_sections()")
    with pytest.raises(CellError):
        helpers.run("raise RuntimeError('summary broke')")


def test_summary_json_records_environment_sections_figures_and_times(helpers, out_dir):
    helpers.run(
        "ENVIRONMENT.update(gpu='NVIDIA H200', profiler='cupti')\n"
        "begin_section(1, 'Set up')\nset_headline(1, 'ready')\n"
        "begin_section(4, 'Cache', skip_reason='needs ncu')\n"
        "begin_section(5, 'Sweep')\nrecord_figure(5, 'fp16 matmul 4096', 791.2, 'TFLOP/s', 'fp16_tflops')\n"
        "summary, path = write_summary(strict=True)\n"
    )
    written = json.loads((out_dir / "summary.json").read_text())
    assert written["environment"]["gpu"] == "NVIDIA H200" and written["strict"] is True
    by_number = {s["number"]: s for s in written["sections"]}
    assert sorted(by_number) == list(range(1, 11))
    assert by_number[1]["status"] == "ok" and by_number[1]["headline"] == "ready"
    assert by_number[4]["status"] == "SKIPPED" and by_number[4]["environment_limit"] is True
    assert by_number[2]["status"] == "NOT RUN", "a section whose cells never ran must not count as ok"
    assert all(isinstance(by_number[n]["seconds"], float) for n in (1, 4, 5))
    assert written["figures"][0]["pct_of_peak"] == 80.0 and written["figures"][0]["check"] == "ok"
    assert written["counts"] == {"ok": 2, "SKIPPED": 1, "FAILED": 0, "NOT RUN": 7}
    assert written["total_seconds"] >= 0


def _run_all_sections(helpers, failing=None, skipped=None):
    for number in range(1, 11):
        reason = "needs Nsight Compute" if number == skipped else None
        helpers.run(_open(number, f"s{number}", reason))
        if number == failing:
            helpers.run("raise RuntimeError('boom')")
    helpers.run("# @title Summary\nend_sections()\nsummary, _ = write_summary(strict=True)")


def test_strict_mode_raises_when_a_section_failed(helpers):
    _run_all_sections(helpers, failing=6)
    with pytest.raises(CellError) as raised:
        helpers.run("# @title Strict mode\nenforce_strict_mode(summary, strict=True)")
    assert "section 6 FAILED: RuntimeError: boom" in raised.value.evalue
    assert helpers.value("len(enforce_strict_mode(summary, strict=False))") == 1, "non-strict runs only report"


def test_strict_mode_accepts_a_skipped_section(helpers):
    _run_all_sections(helpers, skipped=4)
    assert helpers.value("enforce_strict_mode(summary, strict=True)") == []


def test_strict_mode_raises_on_a_suspect_figure(helpers):
    _run_all_sections(helpers)
    helpers.run(
        "ENVIRONMENT['gpu'] = 'Tesla T4'\nrecord_figure(6, 'x * 2', 900.0, 'GB/s', 'dram_gbs')\n"
        "summary, _ = write_summary(strict=True)"
    )
    with pytest.raises(CellError) as raised:
        helpers.run("# @title Strict mode\nenforce_strict_mode(summary, strict=True)")
    assert "SUSPECT figure in section 6" in raised.value.evalue


def test_missing_libcupti_says_which_cell_to_rerun(helpers, tmp_path):
    with pytest.raises(CellError) as raised:
        helpers.run(f"preload_libcupti({str(tmp_path)!r})")
    assert raised.value.ename == "FileNotFoundError" and "Re-run the CUPTI install cell" in raised.value.evalue


def test_failed_pip_install_raises_with_pips_error_and_what_to_do(helpers, tmp_path):
    empty_wheelhouse = tmp_path / "wheels"
    empty_wheelhouse.mkdir()
    with pytest.raises(CellError) as raised:
        helpers.run(f"pip_install(['no-such-package-xyz==1.0'], wheelhouse={str(empty_wheelhouse)!r})", timeout=300)
    assert raised.value.ename == "RuntimeError"
    assert "no-such-package-xyz" in raised.value.evalue and "NSPY_TUTORIAL_WHEELHOUSE" in raised.value.evalue


def test_ncu_install_without_apt_explains_what_to_do(helpers, tmp_path):
    path, message = helpers.value(
        f"(lambda saved: (os.environ.__setitem__('PATH', {str(tmp_path)!r}),"
        f" install_ncu_with_apt(['2026.3.1'], {str(tmp_path / 'log')!r}),"
        " os.environ.__setitem__('PATH', saved))[1])(os.environ['PATH'])"
    )
    assert path is None and "NCU_PATH" in message


def test_nothing_is_written_outside_the_output_folder(helpers, out_dir, tmp_path):
    helpers.run(_open(1) + "\nsummary, _ = write_summary()")
    outside = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_relative_to(out_dir))
    assert outside == ["out"] or outside == [], f"the helpers wrote outside OUT_DIR: {outside}"
    assert os.listdir(out_dir) == ["summary.json"]


@pytest.mark.parametrize(
    ("value", "unit", "base"),
    [(1500.0, "ns", 1.5e-6), (1500.0, "nsecond", 1.5e-6), (2.0, "usecond", 2e-6), (3.0, "Mbyte", 3e6),
     (7.0, "byte", 7.0), (1.59, "cycle/nsecond", 1.59e9), (1.59e9, "cycle/second", 1.59e9), (585.0, "MHz", 5.85e8)],
)  # fmt: skip
def test_ncu_units_convert_to_base_units(helpers, value, unit, base):
    assert helpers.value(f"to_base_units({value}, {unit!r})") == pytest.approx(base)


def test_an_unknown_unit_is_an_error_not_a_silent_factor(helpers):
    with pytest.raises(CellError) as raised:
        helpers.run("to_base_units(1.0, 'percent')")
    assert raised.value.ename == "ValueError" and "unexpected unit" in raised.value.evalue


@pytest.mark.parametrize(
    ("kernel", "short"),
    [
        ("_ZN7cutlass7Kernel2I43cutlass_80_simt_sgemm_256x128_8x4_nn_align1EEvNT_6ParamsE",
         "cutlass_80_simt_sgemm_256x128_8x4_nn_align1"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)",
         "at::native::vectorized_elementwise_kernel"),
        ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ],
)  # fmt: skip
def test_kernel_names_are_shortened_to_what_a_reader_can_use(helpers, kernel, short):
    assert helpers.value(f"short_kernel_name({kernel!r})") == short


def test_long_kernel_names_are_cut_to_fit_a_table(helpers):
    shortened = helpers.value(f"short_kernel_name({'sm90_xmma_gemm_' + 'x' * 80!r})")
    assert len(shortened) == 48 and shortened.endswith("..."), shortened


def test_figure_cells_run_only_for_a_healthy_section_and_a_raise_there_fails_it(helpers):
    helpers.run(_open(5, "five"))
    helpers.run(_open(6, "six", skip_reason="needs Nsight Compute"))
    ran = helpers.run(
        "# @title Record figures\n"
        "@section_figures(6)\ndef _():\n    print('MUST NOT RUN')\n"
        "@section_figures(5)\ndef _():\n    raise KeyError('fp16')\n"
    )
    assert "MUST NOT RUN" not in ran, "a SKIPPED section's figures must not be recorded"
    assert helpers.value("SECTIONS[5]['status']") == "FAILED" and "KeyError" in helpers.value("SECTIONS[5]['reason']")
    assert helpers.value("SECTIONS[6]['status']") == "SKIPPED"
