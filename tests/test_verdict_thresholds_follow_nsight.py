"""A verdict's reference line is the library's, not a number of the notebook's own: section 8 says the auto runs'
margin fell to the pause line exactly when their lowest margin reached nsight's DEFAULT_THERMAL_WAIT, the margin at
which thermal_mode="auto" pauses (nsight/thermovision.py). Run on the recording's frames, altered, in a real kernel."""

from __future__ import annotations

import re

import pytest

PAUSE = re.compile(r"its margin (fell|never fell) to (\d+) C$")


@pytest.mark.parametrize(("above_the_line", "said"), [(-3, "fell"), (0, "fell"), (1, "never fell"), (9, "never fell")])
def test_section_8_says_the_margin_fell_only_when_the_auto_runs_reached_nsights_pause_line(
    recorded, above_the_line, said
):
    recorded.section(8)
    line = recorded.value("__import__('nsight.thermovision', fromlist=['_']).DEFAULT_THERMAL_WAIT")
    findings = recorded.altered(8, f"auto_runs = auto_runs.assign(margin_c={line + above_the_line})")["findings"]
    (match,) = [m for m in map(PAUSE.search, findings) if m]
    assert (match[1], int(match[2])) == (said, line), (
        f"a lowest margin of {line + above_the_line} C against nsight's pause line {line} C: {match[0]!r}"
    )
