"""scripts/notebook_format.py (--check names what is off, --fix repairs only that) and scripts/embed_modules.py."""

import ast
import json
import shutil

import embed_modules
import notebook_format
import pytest
import recordings
from fake_env import requirement_pins
from support import NOTEBOOK, ROOT

from plumbing.cells import HARNESS, SECTION_PLAN, SETUP_HELPERS


def _cells(path=NOTEBOOK):
    return {cell["id"]: cell["source"] for cell in recordings.load_cells(path)}


def _edited(tmp_path, change):
    notebook = json.loads(NOTEBOOK.read_text())
    for cell in notebook["cells"]:
        cell["source"] = change(cell["id"], "".join(cell["source"]))
    (tmp_path / "edited.ipynb").write_text(notebook_format.render(notebook))
    return tmp_path / "edited.ipynb"


def test_the_committed_notebook_is_canonical_and_fix_leaves_it_byte_for_byte(tmp_path):
    assert notebook_format.problems(NOTEBOOK) == [], "run: python scripts/notebook_format.py --fix"
    copy = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, copy)
    assert notebook_format.main(["--fix", str(copy)]) == 0
    assert copy.read_bytes() == NOTEBOOK.read_bytes(), "--fix changed a notebook that --check calls canonical"


def test_every_long_folded_cell_embeds_its_code_from_plumbing():
    by_hand = [i for i, s in _cells().items() if s.startswith("# @title") and len(s.splitlines()) > 15
               and not embed_modules.embedded_modules(s)]  # fmt: skip
    assert not by_hand, f"folded cells written by hand: move their code to plumbing/ and embed it: {by_hand}"


def test_check_names_what_is_off_and_fix_repairs_the_metadata_but_no_source(tmp_path):
    noisy = json.loads(NOTEBOOK.read_text())
    noisy["metadata"].update(colab={"provenance": [{"file_id": "x"}]}, widgets={"state": {}})  # gpuType dropped
    code = [cell for cell in noisy["cells"] if cell["cell_type"] == "code"]
    folded, code = (next(c for c in code if notebook_format.is_folded(c) is want) for want in (True, False))
    folded["metadata"] = {}
    code.update(outputs=[{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}], execution_count=3,
                metadata={"executionInfo": {"elapsed": 5}})  # fmt: skip
    code["source"].append("\nprint('edited by hand')")  # another helper's edit: no business of the format
    del noisy["cells"][0]["id"], noisy["nbformat_minor"]
    (path := tmp_path / "noisy.ipynb").write_text(json.dumps(noisy))
    found = "\n".join(notebook_format.problems(path))
    missed = [one for one in ("gpuType", "widgets", "has outputs", "execution_count 3", "executionInfo", "cellView",
                              "has id None", "minor is None") if one not in found]  # fmt: skip
    assert not missed, f"--check did not report {missed}:\n{found}"
    assert notebook_format.main(["--check", str(path)]) == 1
    assert notebook_format.main(["--fix", str(path)]) == 0 and notebook_format.problems(path) == []
    fixed = json.loads(path.read_text())
    assert ["".join(c["source"]) for c in fixed["cells"]] == ["".join(c["source"]) for c in noisy["cells"]]


@pytest.mark.parametrize("script", [notebook_format, embed_modules])
@pytest.mark.parametrize("mode", ["--check", "--fix"])
@pytest.mark.parametrize(("cell", "said"), [  # what a hand edit can leave; --fix must neither empty nor guess them
    ({"cell_type": "markdown", "id": "intro"}, "cell 1 (id 'intro') has no source"),
    ({"cell_type": "code", "id": "run-it", "source": None}, "cell 1 (id 'run-it') has source null"),
    ({"cell_type": "bogus", "id": "notes", "source": "x"}, "cell 1 (id 'notes') has cell_type 'bogus'")])  # fmt: skip
def test_a_cell_without_usable_source_or_type_is_named_and_left_as_it_was(tmp_path, capsys, cell, said, mode, script):
    good = {"cell_type": "markdown", "id": "heading", "metadata": {}, "source": ["# Title\n"]}
    path = tmp_path / "edited.ipynb"
    path.write_text(json.dumps({"cells": [good, cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    before = path.read_bytes()
    assert script.main([mode, str(path)]) == 2 and path.read_bytes() == before, f"{mode}: refuse (exit 2), unchanged"
    err = capsys.readouterr().err
    assert said in err and "git checkout" in err, f"{mode} must name the cell by index and id, and the way back: {err}"


def test_embed_check_names_the_stale_cell_and_fix_restores_only_the_embedding_cells(tmp_path, capsys):
    visible = SECTION_PLAN[2]["run"][0]
    edited = _edited(tmp_path, lambda cell_id, s: s.replace("SUSPECT_FLOOR_PCT = 5.0", "SUSPECT_FLOOR_PCT = 1.0")
                     + ("\nprint('edited elsewhere')" if cell_id == visible else ""))  # fmt: skip
    assert embed_modules.main(["--check", str(edited)]) == 1
    out = capsys.readouterr().out
    assert f"({HARNESS}) differs from plumbing/sections.py, plumbing/harness.py" in out, out
    assert out.count("differs from") == 1, "only the cell that differs from its modules may be named"
    assert embed_modules.main(["--fix", str(edited)]) == 0
    after, committed = _cells(edited), _cells()
    assert after[HARNESS] == committed[HARNESS], "--fix must give back exactly the cell the modules make"
    assert after[visible] == committed[visible] + "\nprint('edited elsewhere')", "--fix touched a cell it does not own"
    assert notebook_format.problems(edited) == [], "--fix must write the notebook in canonical form"


def test_a_module_that_is_missing_is_named_and_nothing_is_written(tmp_path, capsys):
    edited = _edited(tmp_path, lambda _, s: s.replace("plumbing/harness.py", "plumbing/harnes.py"))
    before = edited.read_bytes()
    assert embed_modules.main(["--fix", str(edited)]) == 2 and edited.read_bytes() == before
    assert "plumbing/figure.py does not exist" in capsys.readouterr().err


def _statements(text: str, constants=()) -> list[str]:
    """A module's top-level statements as Python, less docstrings and what a cell cannot import."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(body := getattr(node, "body", None), list) and len(body) > 1 and isinstance(body[0], ast.Expr):
            node.body = body[1:] if isinstance(getattr(body[0].value, "value", None), str) else body
    return [ast.unparse(node) for node in tree.body if not (
        isinstance(node, ast.ImportFrom) and node.module.split(".")[0] in ("plumbing", "__future__")
        or isinstance(node, ast.Assign) and {getattr(t, "id", None) for t in node.targets} & constants)]  # fmt: skip


@pytest.mark.parametrize("cell_id", [i for i, s in _cells().items() if embed_modules.embedded_modules(s)])
def test_what_embedding_writes_is_its_modules_code_statement_for_statement(cell_id):
    source = embed_modules.generated_source(_cells()[cell_id])  # what --fix writes there
    modules = embed_modules.embedded_modules(source)
    constants = {name for _, name in modules if name}
    cell = ast.parse(source).body
    for path, name in modules:
        text = (ROOT / path).read_text()
        if name is None:
            expected = _statements(text, constants)
            got, cell = [ast.unparse(node) for node in cell[: len(expected)]], cell[len(expected) :]
            assert got == expected, f"embedding {path} in {cell_id} changed its code: check embed_modules.module_code"
            continue
        (target,), value = cell[0].targets, cell.pop(0).value.value
        assert target.id == name and (value.strip() == text.strip() if path.endswith(".txt") else
                                      _statements(value) == _statements(text)), f"{name} is not {path}"  # fmt: skip
    assert not cell, f"the cell {cell_id} holds code none of its modules has"


def test_the_setup_helpers_cell_installs_exactly_the_pins_requirements_txt_holds():
    namespace: dict = {}
    exec(compile(_cells()[SETUP_HELPERS], SETUP_HELPERS, "exec"), namespace)  # defines only: nothing runs at import
    pins, cupti_pins = namespace["PINS"], namespace["CUPTI_PINS"]
    assert pins and cupti_pins and not set(pins) & set(cupti_pins), "the main and the [cupti] pins: both, apart"
    assert {**pins, **cupti_pins} == requirement_pins(ROOT / "requirements.txt"), "check pins_from_requirements"
