"""scripts/notebook_format.py: the committed notebook is canonical (metadata, no outputs); every long folded cell
comes from a module; --check names what is off (a cell that differs from its module included); --fix rewrites
exactly the cells that name a module and the Colab noise.
"""

from __future__ import annotations

import ast
import json
import shutil

import notebook_format
import pytest
from fake_env import requirement_pins
from support import NOTEBOOK, ROOT

from plumbing.cells import HARNESS, SECTION_PLAN, SETUP_HELPERS

FEW_LINES = 15  # a folded cell longer than this is plumbing and must come from a module


def _cells(path=NOTEBOOK):
    return {cell["id"]: "".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]}


def _write(tmp_path, change):
    notebook = json.loads(NOTEBOOK.read_text())
    for cell in notebook["cells"]:
        cell["source"] = change(cell["id"], "".join(cell["source"]))
    path = tmp_path / "edited.ipynb"
    path.write_text(notebook_format.render(notebook))
    return path


def test_every_long_folded_cell_is_embedded_from_a_module():
    long_by_hand = [
        cell_id
        for cell_id, source in _cells().items()
        if source.startswith("# @title")
        and len(source.splitlines()) > FEW_LINES
        and not notebook_format.embedded_modules(source)
    ]
    assert not long_by_hand, f"folded cells written by hand, not embedded from plumbing/: {long_by_hand}"


def test_the_embedded_modules_are_the_ones_in_the_repository():
    embedded = {
        path for source in _cells().values() for path, _ in notebook_format.embedded_modules(source)
    }  # fmt: skip
    assert embedded == {"plumbing/sections.py", "plumbing/harness.py", "plumbing/setup_helpers.py",
                        "plumbing/ncu_probe.py", "plumbing/figures.py",
                        "plumbing/report_tools.py", "requirements.txt"}  # fmt: skip
    assert notebook_format.problems(NOTEBOOK) == [], "run: python scripts/notebook_format.py --fix"


def test_check_names_the_cell_and_module_that_differ_and_fix_restores_the_module(tmp_path):
    edited = _write(tmp_path, lambda cell_id, s: s.replace("SUSPECT_FLOOR_PCT = 5.0", "SUSPECT_FLOOR_PCT = 1.0"))
    problems = notebook_format.problems(edited)
    assert len(problems) == 1 and f"({HARNESS}) differs from plumbing/sections.py, plumbing/harness.py" in problems[0]
    assert notebook_format.main(["--check", str(edited)]) == 1
    assert notebook_format.main(["--fix", str(edited)]) == 0
    assert _cells(edited) == _cells(), "--fix must give back exactly the committed cells"


def test_fix_rewrites_only_the_cells_that_name_a_module(tmp_path):
    visible = SECTION_PLAN[2]["run"][0]  # another helper's visible cell, edited in parallel
    edited = _write(tmp_path, lambda cell_id, s: s + "\nprint('edited elsewhere')" if cell_id == visible else s)
    notebook_format.main(["--fix", str(edited)])
    after = _cells(edited)
    assert after[visible].endswith("print('edited elsewhere')") and after[HARNESS] == _cells()[HARNESS]


def test_the_setup_helpers_cell_installs_exactly_the_pins_requirements_txt_holds():
    """The cell embeds requirements.txt and reads its pins from that text, as the module reads the file."""
    from plumbing import setup_helpers

    source = _cells()[SETUP_HELPERS]
    namespace: dict = {}
    exec(compile(source, SETUP_HELPERS, "exec"), namespace)  # defines only: nothing runs at import
    assert namespace["REQUIREMENTS"].strip() == (ROOT / "requirements.txt").read_text().strip()
    assert (namespace["PINS"], namespace["CUPTI_PINS"]) == (setup_helpers.PINS, setup_helpers.CUPTI_PINS)
    pins, cupti_pins = namespace["PINS"], namespace["CUPTI_PINS"]
    assert pins and cupti_pins and not set(pins) & set(cupti_pins), (
        f"the main set and the CUPTI set ([cupti] in requirements.txt) must both hold pins, apart: {pins} {cupti_pins}"
    )
    assert {**pins, **cupti_pins} == requirement_pins(ROOT / "requirements.txt"), (
        "the cell must pin every name==version line of requirements.txt, no more: check pins_from_requirements"
    )


def test_a_pin_changed_in_requirements_txt_makes_the_setup_helpers_cell_stale(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "plumbing", repo / "plumbing")
    (repo / "requirements.txt").write_text(
        (ROOT / "requirements.txt").read_text().replace("nvtx==0.2.17", "nvtx==0.2.18")
    )
    source = _cells()[SETUP_HELPERS]
    assert notebook_format.generated_source(source, repo) != source, "the cell no longer holds requirements.txt"
    assert "nvtx==0.2.18" in notebook_format.generated_source(source, repo), "--fix must embed the new pin"


def test_a_missing_module_is_named_and_nothing_is_written(tmp_path):
    edited = _write(tmp_path, lambda cell_id, s: s.replace("plumbing/report_tools.py", "plumbing/report_tool.py"))
    before = edited.read_text()
    assert notebook_format.main(["--fix", str(edited)]) == 1
    assert edited.read_text() == before
    assert any("plumbing/report_tool.py does not exist" in problem for problem in notebook_format.problems(edited))


@pytest.mark.parametrize("cell_id", [HARNESS, SETUP_HELPERS])
def test_embedded_cells_hold_no_package_imports_or_docstrings(cell_id):
    tree = ast.parse(_cells()[cell_id])
    assert not [
        node for node in tree.body if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("plumbing")
    ], "Colab has no plumbing package: the cell that embeds a module must define what it imports"
    assert not (isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant))


def test_format_tool_check_fails_on_colab_noise_and_fix_restores_canonical_form(tmp_path):
    noisy = json.loads(NOTEBOOK.read_text())
    noisy["metadata"]["colab"] = {"provenance": [{"file_id": "x"}]}  # Colab dropped gpuType
    noisy["metadata"]["widgets"] = {"state": {}}
    code = next(cell for cell in noisy["cells"] if cell["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}]
    code["execution_count"] = 3
    code["metadata"]["executionInfo"] = {"elapsed": 5}
    del noisy["cells"][0]["id"]
    noisy["nbformat_minor"] = 4
    path = tmp_path / "noisy.ipynb"
    path.write_text(json.dumps(noisy))
    problems = "\n".join(notebook_format.problems(path))
    for expected in ("gpuType", "widgets", "has outputs", "execution count", "executionInfo", "ids", "4.4"):
        assert expected in problems, f"--check did not report {expected!r}:\n{problems}"
    assert notebook_format.main(["--check", str(path)]) == 1
    assert notebook_format.main(["--fix", str(path)]) == 0
    assert notebook_format.problems(path) == []
    fixed = json.loads(path.read_text())
    original = json.loads(NOTEBOOK.read_text())
    assert ["".join(c["source"]) for c in fixed["cells"]] == ["".join(c["source"]) for c in original["cells"]]


def test_committed_notebook_metadata_is_canonical():
    assert notebook_format.problems(NOTEBOOK) == [], "run: python scripts/notebook_format.py --fix"


def test_committed_notebook_has_no_outputs_or_execution_counts(notebook):
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    dirty = [c.get("id") for c in code if c.outputs or c.execution_count is not None]
    assert not dirty, f"cells with outputs or counts: {dirty}; run scripts/notebook_format.py --fix"


BROKEN_CELLS = {  # what a hand edit can leave; --fix used to empty or keep them and call the file canonical
    "no source": ({"cell_type": "markdown", "id": "intro", "metadata": {}}, "cell 1 (id 'intro') has no source"),
    "a null source": ({"cell_type": "code", "id": "run-it", "metadata": {}, "source": None, "outputs": [],
                       "execution_count": None}, "cell 1 (id 'run-it') has source null, not text"),
    "a bogus cell_type": ({"cell_type": "bogus", "id": "notes", "metadata": {}, "source": "x"},
                          "cell 1 (id 'notes') has cell_type 'bogus'"),
}  # fmt: skip


@pytest.mark.parametrize("mode", ["--check", "--fix"])
@pytest.mark.parametrize("kind", BROKEN_CELLS)
def test_a_cell_without_usable_source_or_type_is_named_by_index_and_id_and_the_file_left_as_it_was(
    tmp_path, capsys, kind, mode
):
    cell, said = BROKEN_CELLS[kind]
    good = {"cell_type": "markdown", "id": "heading", "metadata": {}, "source": ["# Title\n"]}
    path = tmp_path / "edited.ipynb"
    path.write_text(json.dumps({"cells": [good, cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    before = path.read_bytes()
    assert notebook_format.main([mode, str(path)]) == 2, f"{mode} on a notebook with {kind} must refuse it (exit 2)"
    err = capsys.readouterr().err
    assert said in err and "git checkout" in err, f"{mode} must name the cell by index and id: {err}"
    assert path.read_bytes() == before, f"{mode} rewrote a notebook with {kind}"
