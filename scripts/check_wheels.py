#!/usr/bin/env python3
"""Check that every pin of requirements.txt (section 1's and the CUPTI set) has a wheel for CPython 3.12 and 3.13
on manylinux x86_64, as Colab (3.13) and the project's runner (3.12) need them. No GPU; it asks PyPI.

    python scripts/check_wheels.py

Exit 0 when every pin has a wheel for every version; 1 naming the version and pip's error otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # run as a script: its neighbour make_wheelhouse.py
from make_wheelhouse import PIP_LIMIT_S, download_command, read_requirements  # noqa: E402

VERSIONS = ("3.12", "3.13")  # the runner's Python, Colab's since 2026-08-25 (environments.md)


def missing_wheels(pins: list[str], python_version: str) -> str:
    """pip's error when some pin has no wheel for this Python (empty when every one has)."""
    with tempfile.TemporaryDirectory(prefix="nspy-wheels-") as folder:
        command = download_command(pins, Path(folder), python_version, deps=False)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_LIMIT_S)
        except subprocess.TimeoutExpired:
            return f"pip download did not end within {PIP_LIMIT_S} s"
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
    return "" if done.returncode == 0 else "\n".join(errors) or done.stderr.strip() or f"pip exit {done.returncode}"


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help, and no argument
    main_pins, cupti_pins = read_requirements(ROOT / "requirements.txt")
    failed = 0
    for version in VERSIONS:
        if problem := missing_wheels(main_pins + cupti_pins, version):
            failed += 1
            fix = "Change that pin to a version with a wheel for it, or check that PyPI is reachable."
            print(f"CPython {version}: a pin of requirements.txt has no manylinux x86_64 wheel:\n{problem}\n{fix}")
        else:
            print(f"CPython {version}: all {len(main_pins) + len(cupti_pins)} pins of requirements.txt have a wheel")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
