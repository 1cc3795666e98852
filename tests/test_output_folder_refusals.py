"""The harness's output folder refused: the message names the setting the learner made (or the default folder),
why it cannot be used, and the one setting that changes it, NSPY_TUTORIAL_OUT (no other name: none other exists)."""

from __future__ import annotations

import importlib
import re

import pytest

import plumbing.harness


@pytest.fixture
def a_file(tmp_path):
    (path := tmp_path / "a_file").write_text("not a folder")
    return path


@pytest.mark.parametrize(
    ("where", "why"),
    [("{file}", "a file, not a folder"), ("{file}/out", "cannot write there")],
    ids=["a file", "a folder inside a file"],
)
def test_an_unusable_output_setting_is_refused_naming_it_why_and_the_setting_that_fixes_it(a_file, where, why):
    given = where.format(file=a_file)
    harness = importlib.reload(plumbing.harness)
    folder = harness.choose_output_dir({"NSPY_TUTORIAL_OUT": given}, on_colab=False)
    with pytest.raises(RuntimeError) as refused:
        harness.prepare_output_dir(folder, {"NSPY_TUTORIAL_OUT": given})
    said = str(refused.value)
    assert said.startswith(f"NSPY_TUTORIAL_OUT={given}: {why}"), f"name the setting as given, then why: {said}"
    assert set(re.findall(r"NSPY_TUTORIAL_\w+", said)) == {"NSPY_TUTORIAL_OUT"}, f"names another setting: {said}"
    assert "Set NSPY_TUTORIAL_OUT to a folder you can write to" in said, f"say what to do: {said}"
    assert a_file.read_text() == "not a folder", "the file given must be left as it was"


def test_an_unusable_default_folder_is_named_with_the_setting_that_moves_it(a_file):
    harness = importlib.reload(plumbing.harness)
    with pytest.raises(RuntimeError) as refused:
        harness.prepare_output_dir(a_file / "nspy_tutorial_out", {})
    said = str(refused.value)
    assert said.startswith(f"{a_file / 'nspy_tutorial_out'}: cannot write there"), said
    assert set(re.findall(r"NSPY_TUTORIAL_\w+", said)) == {"NSPY_TUTORIAL_OUT"}, f"names another setting: {said}"
