"""scripts/make_wheelhouse.py: the wheels an offline GPU runner needs, the CUPTI set kept apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import make_wheelhouse
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
