"""The notebook's folders (output, CUPTI) by the one set of folder rules (plumbing/folders.py): a refusal names the
setting the learner made (or the default folder), why, and the one setting that changes it."""

from __future__ import annotations

import os
import pwd
import re
import site
import sysconfig
from pathlib import Path

import pytest
from support import ROOT

from plumbing import folders, setup_helpers


def test_an_unusable_default_folder_is_named_with_the_setting_that_moves_it(tmp_path):
    (a_file := tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(ValueError) as refused:
        folders.prepare_output_dir(a_file / "nspy_tutorial_out", {})
    said = str(refused.value)
    assert said.startswith(f"the default folder {a_file / 'nspy_tutorial_out'}: ") and "cannot be made" in said
    assert set(re.findall(r"NSPY_TUTORIAL_\w+", said)) == {"NSPY_TUTORIAL_OUT"}, f"names another setting: {said}"


# Where a folder setting points ({home}: HOME, holding the user's files; marked places are refused by place alone).
PLACES = {
    "HOME, marked": "{home}",
    "/": "/",
    "a new folder among the clone's tracked files": f"{ROOT}/docs/verified/new",
    "inside the clone's .git": f"{ROOT}/.git/new",
    "a new folder in site-packages": str(Path(sysconfig.get_paths()["purelib"]) / "new"),
    "~/.local, marked and empty (it holds the user's site-packages)": "~/.local",
    "a folder of the user's own files": "~/mine",
    "a marked folder whose mark is a link to the user's file": "~/linked",
    "a blank": " ",
    "a file": "~/mine/thesis.txt",
    "a folder inside a file": "~/mine/thesis.txt/out",
}


@pytest.mark.parametrize("setting", ["NSPY_TUTORIAL_OUT", "NSPY_TUTORIAL_CUPTI_DIR"])
@pytest.mark.parametrize("place", PLACES)
def test_the_notebooks_folders_are_its_own_never_home_root_the_clone_or_python_packages(
    tmp_path, monkeypatch, setting, place
):
    home = tmp_path / "home"
    for folder in (home, home / ".local", home / "mine", home / "linked"):
        folder.mkdir()
    (home / "mine" / "thesis.txt").write_text("my own work")
    (home / folders.MARK).write_text("")
    (home / ".local" / folders.MARK).write_text("")
    (home / "linked" / folders.MARK).symlink_to(home / "mine" / "thesis.txt")
    user_site = home / ".local" if place.startswith("~/.local") else tmp_path / "userbase"  # else HOME held it
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user_site / "lib/python3/site-packages"))
    environ = {"HOME": str(home), setting: PLACES[place].format(home=home)}
    with pytest.raises(ValueError) as refused:  # as the notebook reads each
        if setting == "NSPY_TUTORIAL_OUT":
            folders.prepare_output_dir(folders.choose_output_dir(environ, on_colab=False), environ)
        else:
            setup_helpers.read_cupti_dir(environ)
    said = str(refused.value)
    assert said.startswith(f"{setting}={environ[setting]}: "), f"name the setting as given, then why: {said}"
    assert set(re.findall(r"NSPY_TUTORIAL_\w+", said)) == {setting}, f"name no other setting: {said}"
    assert f"Set {setting} to a new or empty folder you can write to" in said, f"say the fix: {said}"
    assert (home / "mine" / "thesis.txt").read_text() == "my own work" and not (home / "new").exists()
    assert sorted(p.name for p in (home / ".local").iterdir()) == [folders.MARK]


def test_a_home_folder_of_a_named_user_is_expanded_with_the_rest_of_the_path():  # settings.bash's: test_settings_bash
    user = pwd.getpwuid(os.getuid())
    assert folders.folder_setting("S", f"~{user.pw_name}/a/b", "fix") == Path(user.pw_dir, "a", "b")
