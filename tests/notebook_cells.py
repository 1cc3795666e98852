"""The suite's reader of the committed notebook's cells (the recording wing's recordings.py was, by accident)."""

import json
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent.parent / "nsight_python_t4_tutorial.ipynb"


def load_cells(path: Path = NOTEBOOK) -> list[dict]:
    """Each cell's id, type and source, in notebook order."""
    cells = json.loads(Path(path).read_text())["cells"]
    return [{"id": cell.get("id"), "type": cell["cell_type"], "source": "".join(cell["source"])} for cell in cells]


def cell_source(cells: list[dict], cell_id: str) -> str:
    """A code cell's source; a KeyError naming the id when the notebook has no such code cell."""
    found = [cell["source"] for cell in cells if cell["id"] == cell_id and cell["type"] == "code"]
    if not found:
        raise KeyError(f"the notebook has no code cell with id {cell_id!r}: its ids changed")
    return found[0]
