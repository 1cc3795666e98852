"""One version per package: what the notebook installs on Colab, what requirements.txt pins for section 1, what the
headless harness installs on the GPU machine and what CI tests with (constraints-ci.txt) must name the same release,
or CI passes on packages no learner and no GPU run ever gets."""

from __future__ import annotations

import re

import nbformat
import pytest
from support import NOTEBOOK, ROOT

from plumbing.setup_helpers import normalize  # PEP 503: pip treats ncu_report and ncu-report as one

CI = "constraints-ci.txt"
PIN_FILES = ("requirements.txt", "requirements-harness.txt", "requirements-dev.txt", CI)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s#;]+)")
PIP_PIN = re.compile(r"(?<![\w.-])([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][^\s\"']*)")


def file_pins(text: str) -> dict[str, str]:
    """{package: version} of a requirements or constraints text's `name==version` lines."""
    found = (PIN.match(line.strip()) for line in text.splitlines())
    return {normalize(match[1]): match[2] for match in found if match}


def notebook_pins(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """{package: version} that the notebook's own %pip / !pip lines install."""
    lines = [line for cell in notebook.cells if cell.cell_type == "code" for line in cell.source.splitlines()]
    installs = [line for line in lines if re.match(r"\s*[%!]\s*pip\s+install\b", line)]
    return {normalize(name): version for line in installs for name, version in PIP_PIN.findall(line)}


def every_source() -> dict[str, dict[str, str]]:
    sources = {name: file_pins((ROOT / name).read_text()) for name in PIN_FILES}
    sources[NOTEBOOK.name] = notebook_pins(nbformat.read(NOTEBOOK, as_version=4))
    empty = [name for name, pins in sources.items() if not pins]
    assert not empty, f"no name==version pin read from {empty}: the pins moved, so these tests read nothing"
    return sources


def test_every_package_has_one_version_across_the_notebook_requirements_harness_and_ci_constraints():
    sources = every_source()
    packages = sorted({package for pins in sources.values() for package in pins})
    disagree = {}
    for package in packages:
        versions = {where: pins[package] for where, pins in sources.items() if package in pins}
        if len(set(versions.values())) > 1:
            disagree[package] = versions
    assert not disagree, (
        f"packages pinned at different versions: {disagree}. Pin one release everywhere (regenerate "
        "constraints-ci.txt as its header says if requirements changed), or CI tests what nobody installs"
    )


@pytest.mark.parametrize(
    ("installer", "pinner"),  # the notebook's %pip by section 1's pins; the harness and the suite by CI's constraints
    [(NOTEBOOK.name, "requirements.txt"), ("requirements-harness.txt", CI), ("requirements-dev.txt", CI)],
)
def test_every_package_a_file_installs_is_pinned_where_it_must_be(installer, pinner):
    sources = every_source()
    loose = sorted(set(sources[installer]) - set(sources[pinner]))
    assert not loose, f"{installer} installs {loose}, which {pinner} leaves free: pin them there too"
