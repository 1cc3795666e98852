"""The notebook's sections: how many, and which need Nsight Compute (the harness embeds this; plumbing/cells.py
re-exports it with the recording plan)."""

SECTION_COUNT = 10
# Counters, an .ncu-rep, or Nsight Compute to compare: SKIPPED under CUPTI.
NCU_ONLY_SECTIONS = frozenset({4, 6, 7, 9, 10})
CUPTI_SECTIONS = frozenset(range(2, SECTION_COUNT + 1)) - NCU_ONLY_SECTIONS  # they run on either backend
