"""tools/safe_io.py: a failed or interrupted write leaves every target as it was, a set of files is written all or
none, only regular files of a bounded size are read (UTF-8 under any locale: test_notebook_format.py)."""

from __future__ import annotations

import errno
import os
import threading

import pytest
import safe_io
from safe_io import FileRefused


def disk_full(*_args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def leftovers(folder) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".partial"))


def test_a_full_disk_while_staging_leaves_every_file_as_it_was_and_says_so(tmp_path, monkeypatch):
    first, second = tmp_path / "README.md", tmp_path / "maintainers.md"
    first.write_text("the whole old page\n" * 1000)
    second.write_text("old maintainers")
    before = first.read_bytes()
    real_fsync, calls = os.fsync, []

    def second_fsync_fails(descriptor):
        calls.append(descriptor)
        disk_full() if len(calls) == 2 else real_fsync(descriptor)

    monkeypatch.setattr(safe_io.os, "fsync", second_fsync_fails)
    with pytest.raises(FileRefused) as refused:
        safe_io.write_files({first: "x" * 100_000, second: "new maintainers"}, what="page")
    assert (first.read_bytes(), second.read_text()) == (before, "old maintainers"), "a failed write changed a file"
    assert leftovers(tmp_path) == [], "a failed write must remove its temporary files"
    message = str(refused.value)
    assert str(second) in message and "No space left" in message and "unchanged" in message, message


def test_a_set_of_files_is_written_all_or_none_when_a_replace_fails(tmp_path, monkeypatch):
    page, html, summary = tmp_path / "page.ipynb", tmp_path / "page.html", tmp_path / "summary.json"
    page.write_text("old page")
    html.write_text("old html")  # summary.json is new: a failed set must not leave it behind
    real_replace, calls = os.replace, []

    def replace_then_fail(source, target):
        calls.append(target)
        if len(calls) == 3:
            disk_full()
        real_replace(source, target)

    monkeypatch.setattr(safe_io.os, "replace", replace_then_fail)
    with pytest.raises(FileRefused, match="unchanged"):
        safe_io.write_files({page: "new page", html: "new html", summary: "{}"}, what="the recording's page")
    assert (page.read_text(), html.read_text()) == ("old page", "old html"), "files already replaced must be put back"
    assert not summary.exists() and leftovers(tmp_path) == [], "a new file of a failed set must not be left"


def test_ctrl_c_during_a_write_leaves_the_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "notebook.ipynb"
    target.write_text("{}")

    def interrupted(_descriptor):
        raise KeyboardInterrupt

    monkeypatch.setattr(safe_io.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        safe_io.write_text(target, '{"cells": []}')
    assert target.read_text() == "{}" and leftovers(tmp_path) == []


def test_a_lone_surrogate_is_refused_by_line_and_column_and_the_file_is_unchanged(tmp_path):
    target = tmp_path / "notebook.ipynb"
    target.write_text("kept")
    with pytest.raises(FileRefused) as refused:
        safe_io.write_text(target, "line one\nab\udc80c\n")
    assert target.read_text() == "kept", "an unencodable character must not leave an empty file"
    assert "U+DC80 on line 2, column 3" in str(refused.value), refused.value
    assert safe_io.unencodable("plain é ✓") is None


def test_a_write_replaces_the_file_with_its_permissions_and_never_follows_a_symlink(tmp_path):
    real = tmp_path / "real.md"
    real.write_text("old")
    real.chmod(0o640)
    (tmp_path / "folder_link").symlink_to(tmp_path)
    (link := tmp_path / "link.md").symlink_to(real)
    for through in (link, tmp_path / "folder_link" / "real.md"):  # README or a page beside a notebook as a link
        with pytest.raises(FileRefused, match="is reached through a symbolic link"):
            safe_io.write_files({tmp_path / "other.md": "new", through: "new"})
        assert real.read_text() == "old" and not (tmp_path / "other.md").exists(), "written through a link"
    safe_io.write_text(real, "new é\n")
    assert real.read_bytes() == "new é\n".encode() and leftovers(tmp_path) == [], "write UTF-8, then move it over"
    assert oct(real.stat().st_mode & 0o777) == oct(0o640), "permissions must stay"


def test_a_folder_as_write_target_or_a_folder_that_takes_no_file_is_refused(tmp_path):
    with pytest.raises(FileRefused, match="is a folder, not a regular file"):
        safe_io.write_text(tmp_path, "text")
    with pytest.raises(FileRefused, match=r"missing/x\.md cannot be written \(No such file or directory\); they are"):
        safe_io.write_text(tmp_path / "missing" / "x.md", "text")


def test_only_an_existing_regular_file_is_read_never_a_device_a_fifo_or_a_folder(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    answers = {}

    def read(name, path):
        try:
            safe_io.read_text(path, what="NOTEBOOK")
        except FileRefused as refused:
            answers[name] = str(refused)

    cases = (("fifo", fifo), ("zero", "/dev/zero"), ("folder", tmp_path), ("missing", tmp_path / "gone"))
    reader = threading.Thread(target=lambda: [read(name, path) for name, path in cases], daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading a FIFO must be refused, not wait for a writer for ever"
    assert "is a FIFO (named pipe), not a regular file" in answers["fifo"], answers
    assert "/dev/zero is a character device, not a regular file" in answers["zero"], answers
    assert "is a folder, not a regular file" in answers["folder"], answers
    assert "gone does not exist: give the path of an existing file" in answers["missing"], answers


def test_a_file_over_the_limit_is_refused_without_reading_it_whole(tmp_path):
    big = tmp_path / "big.ipynb"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(FileRefused, match="larger than"):
        safe_io.read_text(big, limit=1024)
    assert safe_io.read_text(big, limit=2048) == "x" * 2048


def test_a_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
    latin = tmp_path / "latin.md"
    latin.write_bytes(b"fine\ncaf\xe9\n")
    with pytest.raises(FileRefused, match=r"not UTF-8 text \(byte 0xe9 on line 2\)"):
        safe_io.read_text(latin)


def test_a_read_only_file_is_not_replaced(tmp_path):
    target = tmp_path / "README.md"
    target.write_text("kept")
    target.chmod(0o444)
    with pytest.raises(FileRefused, match=r"is read-only: nothing was written; make it writable first \(chmod u\+w"):
        safe_io.write_text(target, "new")
    assert target.read_text() == "kept"
