"""The two guides say what the code does: README.md (learners: what to do when a cell fails; its Colab badge opens the
notebook the notebook's own badge opens) and docs/maintainers.md (the settings table, and no figure tied to an old
commit outside the generated tables)."""

import importlib.util
import json
import re
from pathlib import Path

from support import NOTEBOOK, ROOT

GUIDE = ROOT / "docs" / "maintainers.md"
SETTING = re.compile(r"\b(NSPY_(?:TUTORIAL|RECORD)_[A-Z_]+|NCU_PATH)\b")
INTERNAL = {"NSPY_TUTORIAL_LIBCUPTI", "NSPY_TUTORIAL_PROBE"}  # the code sets them for its own children
NSIGHT = Path(importlib.util.find_spec("nsight").origin).parent  # the installed nsight-python: its own messages


def code_texts() -> dict[Path, str]:
    files = [NOTEBOOK, *(ROOT / "plumbing").glob("*.py"), *(ROOT / "tests").glob("*.py")]
    files += [path for code in ("scripts", "tools", "recording") for path in (ROOT / code).glob("*")]  # the wing may go
    return {path: path.read_text() for path in files if path.is_file() and path != Path(__file__)}


def settings_table() -> set[str]:
    table = GUIDE.read_text().split("### Settings", 1)[1].split("\n### ", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for cell in first_cells for name in re.findall(r"`([A-Z_]+)`", cell)}


def test_the_settings_table_lists_every_setting_the_code_reads_and_no_other():
    read = {name for text in code_texts().values() for name in SETTING.findall(text)} - INTERNAL
    read |= {"PYTHON"} if "${PYTHON:-python3}" in (ROOT / "scripts" / "run_tests").read_text() else set()
    table = settings_table()
    assert table == read, (
        f"docs/maintainers.md's settings table: add {sorted(read - table)}, remove {sorted(table - read)} (or, for a "
        "variable the code sets for itself, add it to INTERNAL here)"
    )


def test_the_readmes_if_a_cell_fails_quotes_messages_a_learner_really_sees():
    part = (ROOT / "README.md").read_text().split("## If a cell fails", 1)[1].split("\n## ", 1)[0]
    quoted = re.findall(r'\*\*"([^"]+)"\*\*', part) + re.findall(r"\*\*`([A-Z][A-Z_]{5,})`\*\*", part)
    assert len(quoted) >= 4, f"the README's troubleshooting lost its messages: {quoted}"
    sources = [*code_texts().values(), *(path.read_text() for path in NSIGHT.rglob("*.py"))]
    unknown = [message for message in quoted if not any(message in text for text in sources)]
    assert not unknown, f"README.md quotes messages neither the notebook nor nsight prints: {unknown}; quote theirs"


def test_the_maintainers_guide_ties_no_figure_to_a_commit_outside_its_generated_table():
    text = GUIDE.read_text()
    head, rest = text.split("<!-- verified-table:begin", 1)
    prose = head + rest.split("<!-- verified-table:end -->", 1)[1]
    pinned = [word for word in re.findall(r"\b[0-9a-f]{7,40}\b", prose) if re.search(r"\d", word)]
    assert not pinned, f"docs/maintainers.md names commits {pinned}: say what holds now, or put it in the evidence"


def colab_badge(text: str) -> str:
    (found,) = set(re.findall(r"https://colab\.research\.google\.com/github/([^\"')\s]+)", text))
    return found


def test_readmes_colab_badge_opens_the_notebook_that_the_notebooks_own_badge_opens():
    first_cell = "".join(json.loads(NOTEBOOK.read_text())["cells"][0]["source"])
    readme, notebook = colab_badge((ROOT / "README.md").read_text()), colab_badge(first_cell)
    assert readme == notebook, f"README opens {readme}, the notebook's badge {notebook}: one branch and path for both"
    assert readme.endswith(f"/{NOTEBOOK.name}"), f"the badge opens {readme}, not the notebook"
