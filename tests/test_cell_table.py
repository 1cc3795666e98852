"""The cell table (plumbing/cells.py): every notebook cell has a section that matches the heading above it, and
the GPU run allows exactly the sections the table says need Nsight Compute to be SKIPPED under CUPTI.
"""

from __future__ import annotations

import re

import pytest
from support import section_problems

from plumbing.cells import CUPTI_SECTIONS, NCU_ONLY_SECTIONS, SECTION_COUNT, section_of

NUMBERED_HEADING = re.compile(r"^## (\d+)\. ")


def test_every_cell_belongs_to_the_section_whose_heading_is_above_it(notebook):
    under_heading, wrong = None, []
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            match = NUMBERED_HEADING.match(cell.source)
            under_heading = int(match.group(1)) if match else None
        if section_of(cell.get("id")) != under_heading:
            wrong.append(f"{cell.get('id')}: table says {section_of(cell.get('id'))}, heading says {under_heading}")
    assert not wrong, "cells whose id names another section than the heading above them:\n" + "\n".join(wrong)


@pytest.mark.parametrize("cell_id", ["s11-plot", "setup", "s3_define", "", None])
def test_an_id_that_names_no_section_is_refused_with_the_rule(cell_id):
    with pytest.raises(KeyError, match="s<N>-<what>"):
        section_of(cell_id)


def test_every_section_runs_on_exactly_one_side_of_the_backend_split():
    assert NCU_ONLY_SECTIONS | CUPTI_SECTIONS == set(range(2, SECTION_COUNT + 1))
    assert not NCU_ONLY_SECTIONS & CUPTI_SECTIONS


# ---------------------------------------------------------------- the GPU run's rule per backend
def _summary(profiler, skipped=(), failed=()):
    sections = [
        {
            "number": n,
            "status": "SKIPPED" if n in skipped else "FAILED" if n in failed else "ok",
            "reason": "",
            "environment_limit": n in skipped,
        }
        for n in range(1, SECTION_COUNT + 1)
    ]
    return {"environment": {"profiler": profiler}, "sections": sections}


def test_a_cupti_run_must_skip_exactly_the_sections_that_need_nsight_compute():
    assert section_problems(_summary("cupti", skipped=NCU_ONLY_SECTIONS)) == []
    one_more = NCU_ONLY_SECTIONS | {min(CUPTI_SECTIONS)}
    assert section_problems(_summary("cupti", skipped=one_more)), "a section that quietly skipped passed"
    one_less = NCU_ONLY_SECTIONS - {max(NCU_ONLY_SECTIONS)}
    assert section_problems(_summary("cupti", skipped=one_less)), "an NCU-only section cannot run under CUPTI"


def test_an_ncu_run_must_skip_nothing():
    assert section_problems(_summary("ncu")) == []
    assert section_problems(_summary("ncu", skipped={10})), "under Nsight Compute nothing may be skipped"
    assert section_problems(_summary("ncu", failed={3}))
    assert section_problems(_summary(None)), "a summary without a backend must not pass"
