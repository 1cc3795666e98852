"""scripts/check_wheels.py (CI): each pin of requirements.txt asked for as a wheel for CPython 3.12 and 3.13, with a
pip that logs what it was asked and lacks the wheels a test says (tests/fakes.py)."""

import os
import subprocess
import sys

import pytest
from fakes import ROOT, calls, clean_environment, pip, requirement_pins


@pytest.mark.parametrize("lacking", [[], ["3.13"], ["3.12", "3.13"]])
def test_every_pin_is_asked_for_as_a_wheel_for_312_and_313_and_a_missing_one_fails_naming_the_version(
    tmp_path, lacking
):
    env = {**clean_environment(), "PYTHONPATH": str(pip(tmp_path, {version: "cachebox==5.2.3" for version in lacking}))}
    done = subprocess.run([sys.executable, ROOT / "scripts/check_wheels.py"], env=env, capture_output=True, text=True)
    said, asked = done.stdout + done.stderr, [call["argv"] for call in calls(tmp_path, "pip")]
    pins = {f"{name}=={version}" for name, version in requirement_pins(ROOT / "requirements.txt").items()}
    versions = [args[args.index("--python-version") + 1] for args in asked]
    assert versions == ["3.12", "3.13"], f"check_wheels asked pip for {versions}"
    for args in asked:
        assert {"download", "--no-deps", "--only-binary=:all:", "manylinux2014_x86_64"} <= set(args), args
        assert pins <= set(args), f"not every pin of requirements.txt was asked for: {pins - set(args)}"
        assert not os.path.exists(args[args.index("--dest") + 1]), "the temporary folder must be gone"
    assert done.returncode == (1 if lacking else 0), said
    for version in ("3.12", "3.13"):
        line = next(line for line in said.splitlines() if line.startswith(f"CPython {version}"))
        assert ("no manylinux x86_64 wheel" in line) is (version in lacking), said
    assert not lacking or "cachebox==5.2.3" in said, "say which pin lacks a wheel"
