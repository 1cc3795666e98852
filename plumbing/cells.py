"""The one place that knows the notebook's cells: each one's section, and which define and which run each section."""

import re

from plumbing.sections import CUPTI_SECTIONS, NCU_ONLY_SECTIONS, SECTION_COUNT  # noqa: F401 (the scripts' one import)

# The cells the scripts and tests name (their ids are spelled here only); a section's verdict cell is its last.
GPU_CHECK = "gpu-check"  # section 1's first code cell: shows the GPU (s1-prepare stops without a usable one)
HARNESS = "harness"  # folded: the harness (plumbing/sections.py, harness.py); the recorders run it first
SETUP_HELPERS = "setup-helpers"  # folded: section 1's helpers (plumbing/setup_helpers.py)
SUMMARY = "summary-code"  # after section 10: writes summary.json
# Section 1's set-up cells after SETUP_HELPERS, by role, in notebook order (from "torch" on a GPU is needed).
SECTION_ONE_CELLS = {
    "prepare": "s1-prepare",
    "pip": "s1-pip-code",
    "choose": "s1-choose",
    "import": "s1-import-code",
    "check": "s1-check",
    "magic": "s1-magic-code",
    "torch": "s1-verdict",
}

# Per section that profiles: "run" cells call the profiler, "define" cells only define what they use ("gpu_define":
# those that read the GPU). A launch-mode child (recording/) replays a section's define and run cells up to its call.
SECTION_PLAN = {
    2: {"define": ("s2-define", "s2-strict"), "run": ("s2-run", "s2-error")},
    3: {"define": ("s3-define", "s3-why-define"), "run": ("s3-run", "s3-why-run")},
    4: {"define": ("s4-define",), "gpu_define": ("s4-sizes",), "run": ("s4-run",)},
    5: {"define": ("s5-define",), "run": ("s5-run",)},
    6: {"define": ("s6-define",), "run": ("s6-run",)},
    7: {"define": ("s7-define",), "run": ("s7-run",)},
    8: {"define": ("s8-define",), "gpu_define": ("s8-collectors",), "run": ("s8-run", "s8-pause-run")},
    9: {"define": ("s9-define",), "run": ("s9-install", "s9-child", "s9-ncu", "s9-cupti")},
    10: {"define": ("s10-define",), "run": ("s10-run", "s10-profile")},
}
# A cell with id s<N> or s<N>-<what> belongs to section N. These are the cells whose ids do not say it;
# None: before section 1 or after section 10 (title, overview, summary, checklist).
UNNUMBERED_CELLS = {
    "tutorial-title": None,
    "overview": None,
    GPU_CHECK: 1,
    HARNESS: 1,
    SETUP_HELPERS: 1,
    "summary-heading": None,
    SUMMARY: None,
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
