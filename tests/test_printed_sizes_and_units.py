"""Figures a section prints with a unit, checked against the files and frames they come from (a size printed in KB
is the file's bytes over 1e3), on the recording in a real kernel."""

from __future__ import annotations

import re

from pytest import approx

LISTED = re.compile(r"^(\S+): ([\d,]+\.\d) KB$")


def test_section_10_lists_each_file_its_call_left_with_its_size_in_kilobytes(recorded):
    printed = recorded.section(10)
    listed = {m[1]: float(m[2].replace(",", "")) for m in map(LISTED.match, printed.splitlines()) if m}
    folder = recorded.out / "s10_softmax"
    files = {path.name: path.stat().st_size for path in folder.iterdir()}
    assert listed.keys() == files.keys(), f"section 10 listed {sorted(listed)}, the folder holds {sorted(files)}"
    for name, size in files.items():
        assert listed[name] == approx(size / 1e3, abs=0.051), f"{name}: {size} bytes printed as {listed[name]} KB"
