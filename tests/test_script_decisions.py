"""What the project's scripts decide, run on small real inputs: which tests the headless run selects and what it
records, the README's verified table, the wheelhouse's contents, and the folded cells' tags that decide what the
HTML page of a run keeps."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap

import make_wheelhouse
import nbformat
import notebook_format
import pytest
import render_recorded
import verified_table
from fake_env import requirement_pins, run_script
from support import NOTEBOOK, ROOT


# ---------------------------------------------------------------- scripts/run_headless
@pytest.fixture(scope="module")
def headless_run(tmp_path_factory):
    """One headless run on the fake python whose pytest exits 5 (pytest's 'no tests collected')."""
    folder = tmp_path_factory.mktemp("headless")
    status, output, calls = run_script("scripts/run_headless", folder, str(folder / "run"), FAKE_PYTEST_EXIT=5)
    return folder / "run", status, output, calls


def test_run_headless_selects_its_gpu_tests_despite_the_suites_default_deselection(headless_run):
    """pyproject's addopts deselect the gpu marker; the headless run's own pytest call must select them again."""
    _, _, output, calls = headless_run
    pytest_calls = [shlex.split(call) for call in calls if call.startswith("-m pytest")]
    assert len(pytest_calls) == 1, f"run_headless must call pytest once: {calls}\n{output[-1500:]}"
    arguments = [word for word in pytest_calls[0][2:] if word not in ("-v",)]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *arguments], cwd=ROOT, capture_output=True, text=True
    )
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert done.returncode == 0 and collected, (
        f"`pytest {' '.join(arguments)}` (run_headless's selection) collects no GPU test: the run would exit 5 with "
        f"no summary. Keep `-m gpu` in scripts/run_headless.\n{done.stdout[-800:]}"
    )
    assert all(line.startswith("tests/test_notebook_gpu.py::") for line in collected), collected


def test_run_headless_exits_non_zero_when_pytest_ran_nothing(headless_run):
    _, status, output, _ = headless_run
    assert status == 5, f"pytest's exit 5 (nothing ran) must be the run's exit status, got {status}:\n{output[-800:]}"


def test_run_info_names_the_full_commit_and_the_notebook_that_ran(headless_run):
    out, _, output, _ = headless_run
    info = json.loads((out / "run_info.json").read_text())
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("this checkout is not a git clone: run_info.json names 'unknown'")
    assert info["commit"] == head.stdout.strip() and re.fullmatch(r"[0-9a-f]{40}", info["commit"]), (
        f"run_info.json must name the full commit that ran ({head.stdout.strip()}), got {info['commit']!r}"
    )
    assert info["notebook_sha256"] == hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    assert info["pytest_exit"] == 5 and isinstance(info["wall_seconds"], int) and info["wall_seconds"] >= 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info["started_utc"]), info["started_utc"]


def test_run_info_names_the_commit_it_is_told(tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    status, output, _ = run_script("scripts/run_headless", tmp_path, str(tmp_path / "run"), NSPY_TUTORIAL_COMMIT=commit)
    assert status == 0, output[-1500:]
    assert json.loads((tmp_path / "run" / "run_info.json").read_text())["commit"] == commit


# ---------------------------------------------------------------- scripts/verified_table.py
def summary_with_figures(tmp_path, figures) -> object:
    folder = tmp_path / "docs" / "verified" / "nvidia-h200-cupti"
    folder.mkdir(parents=True)
    summary = {
        "environment": {"gpu": "NVIDIA H200", "driver": "580.82.07", "profiler": "cupti", "nsight_python": "1.1.0",
                        "torch": "2.11.0"},
        "created_utc": "2026-11-30T12:00:00+00:00",
        "counts": {"ok": 6, "SKIPPED": 4, "FAILED": 0, "NOT RUN": 0},
        "figures": figures,
        "total_seconds": 24.9,
    }  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder / "summary.json"


def figure(name, value, pct, check):
    return {"section": 5, "name": name, "value": value, "unit": "TFLOP/s", "peak": 989.0, "peak_kind": "fp16_tflops",
            "peak_gpu": "H200 SXM", "pct_of_peak": pct, "check": check}  # fmt: skip


def test_the_verified_table_flags_a_suspect_figure_and_only_that_one(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_table, "ROOT", tmp_path)
    path = summary_with_figures(
        tmp_path, [figure("fp16 matmul", 795.1, 80.4, "ok"), figure("fp32 matmul", 0.8, 0.1, "SUSPECT")]
    )
    cells = verified_table.row(path).split(" | ")
    figures = next(cell for cell in cells if "matmul" in cell).split("; ")
    assert figures == ["fp16 matmul: 795.1 TFLOP/s (80.4%)", "fp32 matmul: 0.8 TFLOP/s (0.1%) SUSPECT"], (
        "a reader of README's table must see which figure the run judged SUSPECT, beside that figure alone"
    )
    assert "| 6 / 4 / 0 |" in verified_table.row(path)


# ---------------------------------------------------------------- scripts/make_wheelhouse.py
DOWNLOADING_PIP = textwrap.dedent(
    """\
    import json, re, sys
    from pathlib import Path

    args = sys.argv[1:]
    dest = Path(args[args.index("--dest") + 1])
    wanted = [arg for arg in args if re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9.]*", arg)]
    if "-r" in args:
        for line in Path(args[args.index("-r") + 1]).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                wanted.append(line)
    if "--no-deps" not in args:
        wanted += {deps!r}  # what the pins depend on, as pip download fetches it
    for pin in wanted:
        name, version = pin.split("==")
        (dest / f"{{name.replace('-', '_')}}-{{version}}-py3-none-any.whl").write_text("")
    """
)
DEPENDENCIES = ["numpy==2.5.2", "pandas==3.0.6", "jinja2==3.1.6"]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    """make_wheelhouse.py --skip-installed for a runner that has numpy, pandas, nsight-python and cuda-bindings 13."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    shim = folder / "shim" / "pip"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("")
    (shim / "__main__.py").write_text(DOWNLOADING_PIP.format(deps=DEPENDENCIES))
    installed = folder / "installed.txt"
    installed.write_text("numpy==2.5.2\npandas==3.0.6\nnsight-python==1.1.0\ncuda-bindings==13.3.1\n")
    dest = folder / "dest"
    command = [sys.executable, str(ROOT / "scripts/make_wheelhouse.py"), "--dest", str(dest), "--skip-installed",
               str(installed)]  # fmt: skip
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(shim.parent)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    names = {
        part: {make_wheelhouse.wheel_name(path) for path in (dest / sub).glob("*.whl")}
        for part, sub in (("main", ""), ("cupti", "cupti"))
    }
    return names


def test_the_wheelhouse_keeps_every_harness_wheel_the_runner_lacks(wheelhouse):
    harness = {make_wheelhouse.normalize(name) for name in requirement_pins(ROOT / "requirements-harness.txt")}
    missing = harness - wheelhouse["main"]
    assert not missing, f"the offline runner could not install the harness: {sorted(missing)} were deleted"
    assert "jinja2" in wheelhouse["main"], "a dependency the runner lacks must stay"


def test_the_wheelhouse_drops_what_the_runner_has_but_keeps_the_notebooks_own_pins(wheelhouse):
    assert not {"numpy", "pandas"} & wheelhouse["main"], f"the runner has numpy and pandas: {wheelhouse['main']}"
    main_pins, _ = make_wheelhouse.read_requirements(ROOT / "requirements.txt")
    pinned = {make_wheelhouse.normalize(pin.split("==")[0]) for pin in main_pins}
    assert "nsight-python" in pinned and pinned <= wheelhouse["main"], (
        f"the notebook installs its pins from the wheelhouse even where the runner has them: {pinned}"
    )


def test_the_wheelhouse_drops_cuda_bindings_only_where_the_runner_has_13(wheelhouse):
    assert "cuda-bindings" not in wheelhouse["cupti"], "the runner's cuda-bindings 13 serves cupti-python"
    assert {"cupti-python", "nvidia-cuda-cupti"} <= wheelhouse["cupti"], wheelhouse["cupti"]


# ---------------------------------------------------------------- scripts/notebook_format.py --fix and the page
def test_fix_keeps_the_folded_cells_outputs_on_the_html_page(tmp_path):
    """A headless run's page drops the folded cells' code, never what they print (environment, statuses, summary)."""
    copy = tmp_path / "notebook.ipynb"
    content = json.loads(NOTEBOOK.read_text())
    for cell in content["cells"]:
        cell["metadata"] = {}  # as a new cell comes from an editor
    copy.write_text(json.dumps(content))
    assert notebook_format.main(["--fix", str(copy)]) == 0
    fixed = nbformat.read(copy, as_version=4)
    folded = [cell for cell in fixed.cells if notebook_format.is_folded(cell)]
    assert folded, "the notebook has no folded cells"
    for cell in folded:
        marker = f"printed by {cell.id}"
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=marker + "\n")]
    page = re.sub(r"<[^>]+>", "", render_recorded.export_html(fixed))
    lost = [cell.id for cell in folded if f"printed by {cell.id}" not in page]
    assert not lost, f"--fix tags these folded cells so that the page drops their outputs too: {lost}"
    code_lines = [cell.source.splitlines()[-1].strip() for cell in folded if len(cell.source.splitlines()) > 3]
    shown = [line for line in code_lines if len(line) > 30 and line in page]
    assert not shown, f"the page must not show the folded cells' code: {shown[:3]}"
