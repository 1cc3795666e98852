"""Verdicts at their reference lines, on the recording's frames altered just either side of the line, in a real
kernel: section 4 calls the SMs lowered at the base clock when it measured 4% under the unlocked clock, and not at 2%
(a clock's run-to-run wobble)."""

from __future__ import annotations

import re

import pytest

BASE_CLOCK = re.compile(r"base clock (lowered the SMs|left the SMs unlocked in this run): ")
LOWER_BASE_CLOCK = """
_base = condition_frames["base clock"].copy()
_clock = _base.Metric == "gpc__cycles_elapsed.avg.per_second"
_cold = condition_frames["cold"].set_index(["Metric", "n"]).AvgValue
_base.loc[_clock, "AvgValue"] = [_cold["gpc__cycles_elapsed.avg.per_second", n] * {share} for n in _base.n[_clock]]
condition_frames = {{**condition_frames, "base clock": _base}}
"""


@pytest.mark.parametrize(("share", "said"), [(0.96, "lowered the SMs"), (0.98, "left the SMs unlocked in this run")])
def test_section_4_calls_the_sms_lowered_at_4_percent_under_the_unlocked_clock_and_not_at_2(recorded, share, said):
    findings = recorded.altered(4, LOWER_BASE_CLOCK.format(share=share))["findings"]
    (match,) = [m for m in map(BASE_CLOCK.search, findings) if m]
    assert match[1] == said, f"the base-clock SM clock at {share} x the cold one's: {findings}"
