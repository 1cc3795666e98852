"""scripts/make_wheelhouse.py: the wheels an offline GPU runner needs, the CUPTI set kept apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import make_wheelhouse
import pytest
from support import ROOT

RECORDING_PIP = textwrap.dedent(
    """\
    import json, re, sys
    from pathlib import Path

    args = sys.argv[1:]
    with open({log!r}, "a") as log:
        log.write(json.dumps(args) + "\\n")
    dest = Path(args[args.index("--dest") + 1])
    for arg in args:
        if re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9.]*", arg):
            name, version = arg.split("==")
            (dest / f"{{name.replace('-', '_')}}-{{version}}-py3-none-any.whl").write_text("")
    """
)


def test_make_wheelhouse_fetches_the_cupti_set_into_its_own_folder(tmp_path):
    shim = tmp_path / "shim" / "pip"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("")
    log = tmp_path / "pip.log"
    (shim / "__main__.py").write_text(RECORDING_PIP.format(log=str(log)))
    dest = tmp_path / "wheelhouse"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shim")}
    command = [
        sys.executable,
        str(ROOT / "scripts/make_wheelhouse.py"),
        "--dest",
        str(dest),
        "--python-version",
        "3.13",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    cupti_call = next(call for call in calls if str(dest / "cupti") in call)
    assert "--no-deps" in cupti_call and "3.13" in cupti_call
    cupti_wheels = sorted(path.name.split("-")[0] for path in (dest / "cupti").glob("*.whl"))
    assert cupti_wheels == ["cuda_bindings", "cupti_python", "nvidia_cuda_cupti", "pyelftools"]
    main_wheels = {path.name.split("-")[0] for path in dest.glob("*.whl")}
    assert {"nsight_python", "cuda_core", "ncu_report", "nvidia_ml_py"} <= main_wheels


def test_wheelhouse_keeps_the_cupti_set_apart():
    main, cupti = make_wheelhouse.read_requirements(ROOT / "requirements.txt")
    assert "nsight-python==1.1.0" in main and not any(pin.startswith("cupti-python") for pin in main)
    assert {pin.split("==")[0] for pin in cupti} == {"cupti-python", "nvidia-cuda-cupti", "pyelftools", "cuda-bindings"}


def test_wheelhouse_reads_pip_freeze_and_plain_name_lists(tmp_path):
    listing = tmp_path / "freeze.txt"
    listing.write_text("# comment\nnumpy==2.5.2\nCuda_Bindings==13.3.1\npytest\n")
    assert make_wheelhouse.read_installed(listing) == {"numpy": "2.5.2", "cuda-bindings": "13.3.1", "pytest": ""}


def test_runner_package_list_names_what_the_runner_lacks_correctly():
    installed = make_wheelhouse.read_installed(ROOT / "scripts/gpu-runner-installed.txt")
    assert installed["torch"] == "2.11.0" and installed["cuda-bindings"] == "13.3.1"
    for absent in ("nsight-python", "nbmake", "ipykernel", "cupti-python", "ncu-report"):
        assert absent not in installed, f"{absent} is not on the runner; listing it would drop its wheel"


def test_skip_installed_drops_only_wheels_this_run_downloaded_and_keeps_the_users_own(tmp_path):
    """Issue 25: --skip-installed deleted 16 wheels it had not downloaded from --dest, without a word."""
    shim = tmp_path / "shim" / "pip"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("")
    (shim / "__main__.py").write_text(RECORDING_PIP.format(log=str(tmp_path / "pip.log")))
    dest = tmp_path / "wheelhouse"
    own = [dest / "numpy-2.0.0-cp312-none-any.whl", dest / "pandas-2.2.0-cp312-none-any.whl",
           dest / "cupti" / "cuda_bindings-12.9.0-cp312-none-any.whl"]  # fmt: skip
    for wheel in own:
        wheel.parent.mkdir(parents=True, exist_ok=True)
        wheel.write_bytes(b"the user's own wheel")
    installed = tmp_path / "freeze.txt"  # the runner has numpy, pandas and cuda-bindings 13
    installed.write_text("numpy==2.5.2\npandas==3.0.6\ncuda-bindings==13.3.1\n")
    command = [sys.executable, str(ROOT / "scripts/make_wheelhouse.py"), "--dest", str(dest), "--skip-installed",
               str(installed), "--no-harness"]  # fmt: skip
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(shim.parent)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = [wheel for wheel in own if wheel.exists() and wheel.read_bytes() == b"the user's own wheel"]
    assert kept == own, (
        f"make_wheelhouse --skip-installed deleted {sorted(set(map(str, own)) - set(map(str, kept)))}, which it did "
        "not download: drop only the wheels this run downloaded (the set in --dest before pip ran stays)"
    )
    assert not list((dest / "cupti").glob("cuda_bindings-13*.whl")), "a wheel it downloaded that the runner has must go"
    assert f"kept the 3 wheels that were in {dest} before this run" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("arguments", "said"),
    [(["--python-version", ""], "--python-version '': give the GPU machine's Python as 3.X or 3.X.Y, 3.11 or newer"),
     (["--python-version", "3.10"], "--python-version '3.10': give"),
     (["--dest", "README.md"], "--dest README.md is a file, not a folder"),
     (["--dest", "/proc/nspy_no_such/wheels"], "--dest /proc/nspy_no_such/wheels: cannot make the wheelhouse folder")],
)  # fmt: skip
def test_make_wheelhouse_refuses_a_python_version_or_dest_it_cannot_use_before_pip_runs(
    arguments, said, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("mine")
    monkeypatch.setattr(make_wheelhouse, "download", lambda *a, **k: pytest.fail("pip ran despite a bad argument"))
    with pytest.raises(SystemExit) as stopped:
        make_wheelhouse.main(arguments if "--dest" in arguments else [*arguments, "--dest", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and said in err, f"name the argument and what it must be: {err}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["README.md"], "nothing may be made"
    assert (tmp_path / "README.md").read_text() == "mine"
