"""tools/notebook_format.py (--check names what is off, --fix repairs only that) and tools/embed_modules.py."""

import ast
import errno
import json
import os
import shutil
import subprocess
import sys

import embed_modules
import notebook_format
import pytest
import safe_io
from fakes import fresh_clone, requirement_pins
from support import NOTEBOOK, ROOT, load_cells

from plumbing.cells import HARNESS, SECTION_PLAN, SETUP_HELPERS


def _cells(path=NOTEBOOK):
    return {cell["id"]: cell["source"] for cell in load_cells(path)}


def _edited(tmp_path, change):
    """The tutorial with each cell's source changed, at the top of a fresh clone (embedding reads its modules)."""
    notebook = json.loads(NOTEBOOK.read_text())
    for cell in notebook["cells"]:
        cell["source"] = change(cell["id"], "".join(cell["source"]))
    edited = fresh_clone(tmp_path / "clone") / "edited.ipynb"
    edited.write_text(notebook_format.render(notebook))
    return edited


def test_the_committed_notebook_is_canonical():
    assert notebook_format.problems(NOTEBOOK) == [], "run: python tools/notebook_format.py --fix"


def test_every_long_folded_cell_embeds_its_code_from_plumbing():
    by_hand = [
        i
        for i, s in _cells().items()
        if s.startswith("# @title") and len(s.splitlines()) > 15 and not embed_modules.embedded_modules(s)
    ]
    assert not by_hand, f"folded cells written by hand: move their code to plumbing/ and embed it: {by_hand}"


def test_check_names_what_is_off_and_fix_repairs_the_metadata_but_no_source_nor_a_runs_outputs(tmp_path, capsys):
    noisy = json.loads(NOTEBOOK.read_text())
    noisy["metadata"].update(colab={"provenance": [{"file_id": "x"}]}, widgets={"state": {}})  # gpuType dropped
    code = [cell for cell in noisy["cells"] if cell["cell_type"] == "code"]
    folded, code = (next(c for c in code if notebook_format.is_folded(c) is want) for want in (True, False))
    folded["metadata"] = {}
    code.update(
        outputs=[{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}],
        execution_count=3,
        metadata={"executionInfo": {"elapsed": 5}},
    )
    code["source"].append("\nprint('edited by hand')")  # another helper's edit: no business of the format
    del noisy["cells"][0]["id"], noisy["nbformat_minor"]
    noisy["cells"][1]["id"] = "has space"  # nbformat 4.5 forbids it: --fix gives a valid one
    (path := tmp_path / "noisy.ipynb").write_text(json.dumps(noisy))
    found = "\n".join(notebook_format.problems(path))
    expected = ["gpuType", "widgets", "has outputs", "execution_count 3", "executionInfo", "cellView", "minor is None"]
    expected += ["has id None", "has id 'has space'"]  # an id missing, and one nbformat 4.5 forbids
    missed = [one for one in expected if one not in found]
    assert not missed, f"--check did not report {missed}:\n{found}"
    assert notebook_format.main(["--check", str(path)]) == 1
    before = path.read_bytes()  # an executed notebook: --fix would delete a run's outputs, so it refuses
    assert notebook_format.main(["--fix", str(path)]) == 2 and path.read_bytes() == before, "a run's outputs deleted"
    assert "holds what a run left (1 outputs" in capsys.readouterr().err, "say why nothing was written"
    code.update(outputs=[], execution_count=None)
    path.write_text(json.dumps(noisy))
    assert notebook_format.main(["--fix", str(path)]) == 0 and notebook_format.problems(path) == []
    fixed = json.loads(path.read_text())
    assert ["".join(c["source"]) for c in fixed["cells"]] == ["".join(c["source"]) for c in noisy["cells"]]


@pytest.mark.parametrize("mode", ["--check", "--fix"])
@pytest.mark.parametrize(
    ("broken", "said"),
    [  # what a hand edit can leave; --fix must neither empty, guess nor drop them
        ({"cell_type": "markdown", "id": "intro"}, "cell 1 (id 'intro') has no source"),
        ({"cell_type": "code", "id": "run-it", "source": None}, "cell 1 (id 'run-it') has source null"),
        ({"cell_type": "bogus", "id": "notes", "source": "x"}, "cell 1 (id 'notes') has cell_type 'bogus'"),
        ({"cell_type": "raw", "id": "m", "source": "x", "notes": "."}, "cell 1 (id 'm') has 'notes', which nbformat"),
    ],
)
def test_a_cell_with_no_usable_source_or_type_or_a_field_nbformat_lacks_is_named_and_left_as_it_was(
    tmp_path, capsys, broken, said, mode
):
    path = _tiny_notebook(tmp_path, cell("markdown", "heading", "# Title"), broken)
    before = path.read_bytes()
    assert notebook_format.main([mode, str(path)]) == 2 and path.read_bytes() == before, f"{mode}: exit 2, unchanged"
    err = capsys.readouterr().err
    assert said in err and "git checkout" in err, f"{mode} must name the cell by index and id, and the way back: {err}"


def test_embed_names_the_stale_cell_and_fix_embeds_only_it_from_the_notebooks_own_clone(tmp_path, capsys):
    visible = SECTION_PLAN[2]["run"][0]
    edited = _edited(tmp_path, lambda cell_id, s: s + ("\nprint('edited elsewhere')" if cell_id == visible else ""))
    module = edited.parent / "plumbing" / "harness.py"  # that clone's module changed, not this one's
    module.write_text(module.read_text().replace("SUSPECT_FLOOR_PCT = 5.0", "SUSPECT_FLOOR_PCT = 2.5"))
    assert embed_modules.main(["--check", str(edited)]) == 1
    out = capsys.readouterr().out
    assert f"({HARNESS}) differs from plumbing/sections.py, plumbing/folders.py, plumbing/harness.py" in out, out
    assert out.count("differs from") == 1, "only the cell that differs from its modules may be named"
    assert embed_modules.main(["--fix", str(edited)]) == 0
    assert "embedded anew from" in capsys.readouterr().out, "--fix must say it embedded, not that the cell differs"
    after, committed = _cells(edited), _cells()
    expected = committed[HARNESS].replace("SUSPECT_FLOOR_PCT = 5.0", "SUSPECT_FLOOR_PCT = 2.5")
    assert after[HARNESS] == expected, "--fix must give back exactly what the notebook's own clone's modules make"
    assert after[visible] == committed[visible] + "\nprint('edited elsewhere')", "--fix touched a cell it does not own"
    assert notebook_format.problems(edited) == [], "--fix must write the notebook in canonical form"
    outside = tmp_path / "alone" / "tutorial.ipynb"
    outside.parent.mkdir()
    shutil.copy(NOTEBOOK, outside)
    assert embed_modules.main(["--check", str(outside)]) == 2 and "holds no plumbing/" in capsys.readouterr().err


def _statements(text: str, constants=()) -> list[str]:
    """A module's top-level statements as Python, less docstrings and what a cell cannot import."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(body := getattr(node, "body", None), list) and len(body) > 1 and isinstance(body[0], ast.Expr):
            node.body = body[1:] if isinstance(getattr(body[0].value, "value", None), str) else body
    return [
        ast.unparse(node)
        for node in tree.body
        if not (
            isinstance(node, ast.ImportFrom)
            and node.module.split(".")[0] in ("plumbing", "__future__")
            or isinstance(node, ast.Assign)
            and {getattr(t, "id", None) for t in node.targets} & constants
        )
    ]


@pytest.mark.parametrize("cell_id", [i for i, s in _cells().items() if embed_modules.embedded_modules(s)])
def test_what_embedding_writes_is_its_modules_code_statement_for_statement(cell_id):
    source = embed_modules.generated_source(_cells()[cell_id])  # what --fix writes there
    modules = embed_modules.embedded_modules(source)
    constants, imported = {name for _, name in modules if name}, set()
    cell = ast.parse(source).body
    for path, name in modules:
        text = (ROOT / path).read_text()
        if name is None:  # less the imports an earlier module of the cell made: the cell makes each once
            expected = [line for line in _statements(text, constants) if line not in imported]
            imported |= {line for line in expected if line.startswith(("import ", "from "))}
            got, cell = [ast.unparse(node) for node in cell[: len(expected)]], cell[len(expected) :]
            assert got == expected, f"embedding {path} in {cell_id} changed its code: check embed_modules.module_code"
            continue
        (target,), value = cell[0].targets, cell.pop(0).value.value
        assert target.id == name and (
            value.strip() == text.strip() if path.endswith(".txt") else _statements(value) == _statements(text)
        ), f"{name} is not {path}"
    assert not cell, f"the cell {cell_id} holds code none of its modules has"


def test_the_setup_helpers_cell_installs_exactly_the_pins_requirements_txt_holds():
    namespace: dict = {}
    exec(compile(_cells()[SETUP_HELPERS], SETUP_HELPERS, "exec"), namespace)  # defines only: nothing runs at import
    pins, cupti_pins = namespace["PINS"], namespace["CUPTI_PINS"]
    assert pins and cupti_pins and not set(pins) & set(cupti_pins), "the main and the [cupti] pins: both, apart"
    assert {**pins, **cupti_pins} == requirement_pins(ROOT / "requirements.txt"), "check pins_from_requirements"


def _tiny_notebook(tmp_path, *cells, metadata=None):
    """A canonical-looking notebook of these cells (in json.dumps' layout, not nbformat's)."""
    metadata = {**notebook_format.CANONICAL_METADATA, **(metadata or {})}
    path = tmp_path / "tiny.ipynb"
    path.write_text(json.dumps({"cells": list(cells), "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}))
    return path


def cell(kind: str, cell_id: str, source: str, **fields) -> dict:
    """A cell as --fix writes it (a code cell without outputs), with the fields given."""
    ran = {"execution_count": None, "outputs": []} if kind == "code" else {}
    return {"cell_type": kind, "id": cell_id, "metadata": {}, "source": source, **ran, **fields}


PNG = {"image/png": "iVBORw0KGgo="}
USERS_OWN = [  # what a user made in a cell: an attachment (a pasted image), tags, metadata of other tools
    cell("markdown", "pasted", "![x](attachment:x.png)", attachments={"x.png": PNG}),
    cell("code", "params", "n = 1", metadata={"tags": ["parameters", "skip-execution"]}),
    cell("raw", "rst", ".. note::", metadata={"raw_mimetype": "text/restructuredtext"}),
    cell("code", "hidden", "x = 2", metadata={"jupyter": {"source_hidden": True}}),
]


def test_fix_keeps_attachments_tags_and_metadata_it_does_not_own_and_folds_an_older_title(tmp_path):
    older_title = cell("code", "old-title", "#@title Colab's older spelling\nx = 3")
    path = _tiny_notebook(tmp_path, *USERS_OWN, older_title, metadata={"jupytext": {"formats": "ipynb,py"}})
    assert notebook_format.main(["--fix", str(path)]) == 0
    fixed = json.loads(path.read_text())
    *kept, folded = [one | {"source": "".join(one["source"])} for one in fixed["cells"]]
    lost = [(mine, got) for mine, got in zip(USERS_OWN, kept, strict=True) if got != mine]
    assert not lost, f"--fix dropped or changed what the user made (made, became): {lost}"
    assert folded["metadata"] == {"cellView": "form", "tags": ["remove-input"]}, "Colab folds it; the page hides it"
    assert fixed["metadata"]["jupytext"] == {"formats": "ipynb,py"}, "notebook metadata lost"
    assert notebook_format.problems(path) == [], "after --fix, --check must call it canonical"


def test_a_full_disk_during_fix_leaves_the_notebook_whole_and_says_so(tmp_path, monkeypatch, capsys):
    path = _tiny_notebook(tmp_path, cell("code", "x", "x = 1"))  # not in nbformat's layout: --fix writes it
    before = path.read_bytes()

    def disk_full(_descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(safe_io.os, "fsync", disk_full)  # embed_modules --fix writes through the same write_notebook
    assert notebook_format.main(["--fix", str(path)]) == 2, "a write that failed must exit 2"
    assert path.read_bytes() == before, "a failed write must leave the notebook as it was, not cut short"
    err = capsys.readouterr().err
    assert "No space left on device" in err and "unchanged" in err and "Traceback" not in err, err


def test_a_lone_surrogate_in_a_cell_is_refused_naming_the_cell_and_the_file_is_unchanged(tmp_path, capsys):
    path = _tiny_notebook(tmp_path, cell("markdown", "bad", "ok\nab\udc80", metadata={"x": 1}))
    before = path.read_bytes()
    assert notebook_format.main(["--fix", str(path)]) == 2 and path.read_bytes() == before
    err = capsys.readouterr().err
    assert "cell 0 (id 'bad') holds U+DC80 on line 2, column 3" in err, err


def test_fix_reads_and_writes_utf8_under_an_ascii_locale(tmp_path):  # embed_modules reads through the same safe_io
    notebook = json.loads(NOTEBOOK.read_text())
    notebook["cells"][0]["source"] = "# Café ✓ — non-ASCII\n"
    (path := tmp_path / NOTEBOOK.name).write_text(json.dumps(notebook, ensure_ascii=False), encoding="utf-8")
    ascii_locale = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    command = [sys.executable, str(ROOT / "tools" / "notebook_format.py"), "--fix", str(path)]
    done = subprocess.run(command, env={**os.environ, **ascii_locale}, capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    first = json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"]
    assert "".join(first) == "# Café ✓ — non-ASCII\n", f"the text was damaged: {first}"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.write_text('{"cells": [{"cell_type": "code", "source": "x"'), "cannot read it as JSON"),
        (lambda p: p.write_text("[1, 2]"), "it is JSON but not a notebook"),
        (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested too deep"),
        (lambda p: p.mkdir(), "is a folder, not a regular file"),  # safe_io's refusals: test_safe_io.py
    ],
)
@pytest.mark.parametrize("script", ["notebook_format.py", "embed_modules.py"])
def test_an_input_that_is_no_readable_notebook_is_named_without_a_traceback(tmp_path, make, said, script):
    (tmp_path / "plumbing").mkdir()
    make(path := tmp_path / "odd.ipynb")
    command = [sys.executable, str(ROOT / "tools" / script), "--fix", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_embed_names_a_module_missing_or_with_a_syntax_error_and_writes_nothing(tmp_path, capsys):
    edited = _edited(tmp_path, lambda _, s: s)
    before, module = edited.read_bytes(), edited.parent / "plumbing" / "harness.py"
    module.unlink()
    assert embed_modules.main(["--fix", str(edited)]) == 2
    err = capsys.readouterr().err
    assert "plumbing/harness.py does not exist" in err and "(named in the cell '# @title Harness:" in err, err
    module.write_text("def broken(:\n")
    assert embed_modules.main(["--fix", str(edited)]) == 2 and edited.read_bytes() == before
    assert "plumbing/harness.py line 1: invalid syntax" in capsys.readouterr().err


def test_embed_runs_on_a_notebook_without_cell_ids(tmp_path, capsys):
    edited = _edited(tmp_path, lambda _, s: s.replace("SUSPECT_FLOOR_PCT = 5.0", "SUSPECT_FLOOR_PCT = 1.0"))
    notebook = json.loads(edited.read_text())
    for cell in notebook["cells"]:
        del cell["id"]
    edited.write_text(json.dumps(notebook))
    assert embed_modules.main(["--check", str(edited)]) == 1
    assert "cell " in capsys.readouterr().out
