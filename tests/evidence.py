"""The committed evidence: each docs/verified folder holds the executed notebook, summary.json and the files nsight's
calls wrote (output_prefix folders), whose frames a section's tests give today's analysis cells."""

import json
from pathlib import Path

import pandas as pd
import pytest
from support import ROOT, load_cells

VERIFIED = ROOT / "docs" / "verified"
EXECUTED = "nsight_python_t4_tutorial.ipynb"
RERECORD = "run it on the GPU runner and commit its folder (docs/maintainers.md says how)"


def runs() -> list[Path]:
    """The evidence folders that hold an executed notebook and its summary.json, newest run last."""
    found = [path.parent for path in VERIFIED.glob(f"*/{EXECUTED}") if (path.parent / "summary.json").is_file()]
    return sorted(found, key=lambda folder: json.loads((folder / "summary.json").read_text())["created_utc"])


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def run_with(prefix: str) -> Path:
    """The newest evidence folder whose calls wrote into `prefix` (an output_prefix folder); skips without one."""
    having = [folder for folder in runs() if any((folder / prefix).glob("processed_data-*.csv"))]
    if not having:
        pytest.skip(f"no evidence folder holds {prefix}/ (nsight's CSVs of that section's calls): {RERECORD}")
    return having[-1]


def written(folder: Path, prefix: str, kind: str = "processed_data") -> list[pd.DataFrame]:
    """The CSVs of one kind that the calls writing into `prefix` left, in call order (nsight numbers them)."""
    files = sorted((folder / prefix).glob(f"{kind}-*.csv"), key=lambda path: int(path.stem.rsplit("-", 1)[1]))
    assert files, f"{folder.name}/{prefix} holds no {kind}-*.csv"
    return [pd.read_csv(path) for path in files]


def gpu(folder: Path) -> str:
    return summary(folder)["environment"]["gpu"]


def printed(folder: Path, cell_id: str) -> str:
    """What a cell of the executed notebook printed (its stdout)."""
    (cell,) = [cell for cell in load_cells(folder / EXECUTED) if cell["id"] == cell_id]
    return "".join("".join(out.get("text", "")) for out in cell["outputs"] if out.get("output_type") == "stream")
