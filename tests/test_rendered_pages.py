"""The HTML pages a reader opens: a CUPTI-mode run from the GPU runner, turned into a page a reader can take in.

scripts/render_recorded.py --executed renders a notebook that scripts/run_headless executed. Run here on the
committed real run (docs/verified/*-cupti/), it must show each SKIPPED section as its heading and one line that
points to the recorded Nsight Compute page, print the CUPTI fallback reason once, and give every plot alt text.
"""

from __future__ import annotations

import html
import re
import shutil
import sys

import nbformat
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import render_recorded  # noqa: E402

RUNS = sorted(path.parent for path in (ROOT / "docs" / "verified").glob("*-cupti/nsight_python_t4_tutorial.ipynb"))
PLACEHOLDER = "No description has been provided for this image"


@pytest.fixture(scope="module", params=RUNS, ids=[run.name for run in RUNS])
def page(request, tmp_path_factory):
    copy = tmp_path_factory.mktemp(request.param.name) / "nsight_python_t4_tutorial.ipynb"
    shutil.copy(request.param / copy.name, copy)
    executed = nbformat.read(copy, as_version=4)
    return executed, render_recorded.cupti_page(copy).read_text()


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_real_cupti_run_is_committed():
    assert RUNS, "no docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb: run scripts/run_headless on a GPU machine"


def test_skipped_sections_are_a_heading_and_one_line_to_the_recorded_page(page):
    executed, rendered = page
    skipped = [
        int(cell.id[1:].split("-")[0])
        for cell in executed.cells
        if cell.cell_type == "code"
        and cell.id.endswith("-open")
        and render_recorded.printed(cell).startswith("SKIPPED")
    ]
    assert skipped, "the committed CUPTI run skipped no section: is it a CUPTI-mode run?"
    recorded = render_recorded.record_ncu.recording_folders()[-1].name
    links = re.findall(r'href="([^"]*recorded_sections\.html)"', rendered)
    assert links == [f"../{recorded}/recorded_sections.html"] * len(skipped), links
    for number in skipped:
        dropped = [
            cell.id for cell in executed.cells if cell.id.startswith(f"s{number}-") and cell.id != f"s{number}-open"
        ]
        leaked = [cell_id for cell_id in dropped if f'id="cell-id={cell_id}"' in rendered]
        assert not leaked, f"section {number} was SKIPPED, yet its cells {leaked} are on the page"
    assert _text(rendered).count("Skipped in this run") == len(skipped)


def test_the_cupti_fallback_reason_is_printed_once(page):
    executed, rendered = page
    reason = render_recorded.cupti_reason(executed)
    assert reason, "the executed run has no CUPTI banner to take the reason from"
    originally = sum(render_recorded.printed(cell).count(reason) for cell in executed.cells if cell.cell_type == "code")
    assert originally > 1, "the run printed the reason once already: this test would prove nothing"
    assert _text(rendered).count(reason) == 1, f"the reason should appear once on the page: {reason!r}"


def test_every_plot_has_alt_text_from_its_title(page):
    _, rendered = page
    images = re.findall(r'<img([^>]*)src="data:image/png', rendered)
    assert images, "the page has no plots"
    alts = [re.search(r'alt="([^"]*)"', attributes) for attributes in images]
    missing = [index for index, alt in enumerate(alts) if not alt or alt.group(1) in ("", PLACEHOLDER)]
    assert not missing, f"plots {missing} (in page order) have no alt text"
    assert all(html.unescape(alt.group(1)).startswith("Plot. title: ") for alt in alts), [a.group(1) for a in alts]
