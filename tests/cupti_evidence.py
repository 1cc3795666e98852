"""Sections 2, 3 and 5 on the headless CUPTI run's evidence (docs/verified/<gpu>-cupti): the frames nsight wrote
there (processed_data-*.csv) stand in for what a section's run cells bound, today's analysis and verdict cells run on
them, and the raw runs nsight wrote beside them (profiled_data-*.csv) are what the tests recompute the numbers from."""

from __future__ import annotations

import pandas as pd
import recordings
from support import ROOT

# The committed headless CUPTI run: the one folder of docs/verified named <gpu>-cupti (the one place that finds it)
(CUPTI_RUN,) = sorted((ROOT / "docs" / "verified").glob("*-cupti"))
RE_RUN = "re-run the headless CUPTI run on the GPU runner (README's recipe) and commit its folder"


def written(folder: str, kind: str) -> list[pd.DataFrame]:
    """The CSVs of one kind (processed_data or profiled_data) that nsight wrote in a call's folder, call by call."""
    paths = sorted((CUPTI_RUN / folder).glob(f"{kind}-*.csv"), key=lambda path: int(path.stem.rsplit("-", 1)[1]))
    assert paths, f"{CUPTI_RUN / folder} holds no {kind}-*.csv: {RE_RUN}"
    return [pd.read_csv(path) for path in paths]


def findings(number: int, bound: dict, upto: str | None = None) -> tuple[list[str], list[tuple]]:
    """What section `number`'s analysis cells (today's sources, up to cell `upto`) conclude from `bound`: its findings
    and figures."""
    said, figures = [], []
    namespace = {"pd": pd, **bound}
    namespace["verdict"] = lambda section, finding: said.append(finding) if section == number else None
    namespace["check_figure"] = lambda *figure: figures.append(figure)
    cells = recordings.load_cells()
    for cell_id, role in recordings.section_steps(cells, number):
        if role == "analysis":
            source = recordings.without_cell_magic(recordings.cell_source(cells, cell_id))
            exec(compile(source, f"<cell {cell_id}>", "exec"), namespace)
        if cell_id == upto:
            break
    return said, figures
