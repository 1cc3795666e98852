"""The harness's unit conversion (in_base_units), which sections 4, 6 and 7 use before any arithmetic.

ncu may scale a metric's unit (ns or usecond, byte or Mbyte); the conversion goes by the Unit column, so the
arithmetic after it is in seconds, bytes and Hz whatever unit ncu chose, and an unknown unit is an error.
"""

from __future__ import annotations

import pandas as pd
import pytest

from plumbing.harness import in_base_units as pivot_in_base_units


def _one(value, unit):
    return pd.DataFrame({"n": [1], "Metric": ["m"], "AvgValue": [value], "Unit": [unit]})


@pytest.mark.parametrize(
    ("value", "unit", "base"),
    [(1500.0, "ns", 1.5e-6), (1500.0, "nsecond", 1.5e-6), (2.0, "usecond", 2e-6), (3.0, "Mbyte", 3e6),
     (7.0, "byte", 7.0), (1.59, "cycle/nsecond", 1.59e9), (1.59e9, "cycle/second", 1.59e9), (585.0, "MHz", 5.85e8),
     (42.0, "%", 42.0)],
)  # fmt: skip
def test_ncu_units_convert_to_base_units(value, unit, base):
    assert pivot_in_base_units(_one(value, unit), index="n").loc[1, "m"] == pytest.approx(base), (
        f"{value} {unit} should be {base} in base units: check TO_BASE_UNITS in plumbing/harness.py"
    )


def test_an_unknown_unit_is_an_error_not_a_silent_factor():
    with pytest.raises(ValueError, match="no conversion for the units"):
        pivot_in_base_units(_one(1.0, "percent"), index="n")
