"""The notebook's cells: which section each belongs to, and which sections need Nsight Compute.

The one place for these facts. The harness (embedded in the notebook), the scripts and the tests read them here.
"""

import re

SECTION_COUNT = 10
NCU_ONLY_SECTIONS = frozenset({4, 6, 7, 10})  # hardware counters or an .ncu-rep: SKIPPED under CUPTI
CUPTI_SECTIONS = frozenset(range(2, SECTION_COUNT + 1)) - NCU_ONLY_SECTIONS  # they run on either backend

# What section 1 leaves for the later sections (the notebook's section 1 cells bind them; scripts/record_ncu.py
# and the recorded page make them too).
SECTION_ONE_NAMES = ("nsight", "torch", "plt", "QUIET", "USE_NCU", "CUPTI_REASON", "ENVIRONMENT", "L2_BYTES",
                     "PEAKS_LABEL", "PEAKS", "NCU_ONLY_SKIP", "CUPTI_DIR")  # fmt: skip

# A cell with id s<N> or s<N>-<what> belongs to section N. These are the cells whose ids do not say it;
# None: before section 1 or after section 10 (title, overview, summary, checklist).
UNNUMBERED_CELLS = {
    "title": None,
    "overview": None,
    "gpu-check": 1,
    "helpers-title": 1,
    "harness": 1,
    "setup-helpers": 1,
    "summary": None,
    "summary-code": None,
    "takeaways": None,
}
SECTION_CELL_ID = re.compile(r"^s(\d+)(?:-[a-z0-9-]+)?$")


def section_of(cell_id):
    """The section a cell belongs to (1..10), None outside the sections; a KeyError for an unknown id."""
    if cell_id in UNNUMBERED_CELLS:
        return UNNUMBERED_CELLS[cell_id]
    match = SECTION_CELL_ID.match(cell_id or "")
    if match is None or not 1 <= int(match.group(1)) <= SECTION_COUNT:
        raise KeyError(
            f"cell id {cell_id!r} names no section: use s<N>-<what> for a cell of section N, "
            "or add it to UNNUMBERED_CELLS in plumbing/cells.py"
        )
    return int(match.group(1))
