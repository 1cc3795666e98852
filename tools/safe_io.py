"""Reading and writing the project's files so that no input and no failure harms them: read_text reads only a
regular file of bounded size, as UTF-8 whatever the locale; write_files writes a set of files all or none (each staged
beside its target, then moved over it), never through a symbolic link. A refusal names the file and what to do.
"""

from __future__ import annotations

import os
import shlex
import stat
import tempfile
from pathlib import Path

READ_LIMIT = 256 * 2**20  # bytes; far above any notebook or page the project writes, far below a machine's memory


class FileRefused(Exception):
    """A file that cannot be read or written safely; the message names it and what to do."""


def quoted(path: Path | str) -> str:
    """The path as a shell word: a pasted `Fix with:` line does what it says, whatever the name holds."""
    return shlex.quote(str(path))


def file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a regular file")


def read_text(path: Path | str, what: str = "the file", limit: int = READ_LIMIT) -> str:
    """The text of a regular file of at most `limit` bytes, as UTF-8 whatever the locale; else FileRefused."""
    try:
        if not stat.S_ISREG(mode := os.stat(path).st_mode):  # known before it is opened: a FIFO would block
            raise FileRefused(f"{what} {path} is {file_kind(mode)}, not a regular file: give the path of a file")
        with open(path, "rb") as file:
            data = file.read(limit + 1)  # never more: a file that grows while read is still bounded
    except FileNotFoundError:
        raise FileRefused(f"{what} {path} does not exist: give the path of an existing file") from None
    except OSError as error:
        raise FileRefused(f"{what} {path} cannot be read ({error.strerror or error})") from None
    if len(data) > limit:
        raise FileRefused(
            f"{what} {path} is larger than {limit // 2**20} MiB, far more than any file this project "
            "reads: give the path of the right file"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise FileRefused(
            f"{what} {path} is not UTF-8 text (byte {data[error.start]:#04x} on line {line}): save it as UTF-8"
        ) from None


def unencodable(text: str) -> str | None:
    """Where the first character UTF-8 cannot encode (a lone surrogate) is, said for a message; None if none is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        before, character = text[: error.start], text[error.start]
        line, column = before.count("\n") + 1, error.start - before.rfind("\n")
        return f"U+{ord(character):04X} on line {line}, column {column}, which UTF-8 cannot write (a lone surrogate)"
    return None


def new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def writable_target(path: Path, what: str) -> Path:
    """Where to write `path`: the path itself; a symbolic link (anywhere on the way), a folder or device refused."""
    target = Path(os.path.realpath(path))
    if target != Path(os.path.abspath(path)):  # a write would land in a file this project did not make
        raise FileRefused(
            f"{what} {path} is reached through a symbolic link (it is {target}): nothing was written; replace the "
            f"link by a file of its own (rm {quoted(path)}) or give the file itself"
        )
    if target.exists() and not target.is_file():
        raise FileRefused(
            f"{what} {path} is {file_kind(os.stat(target).st_mode)}, not a regular file: nothing was written"
        )
    if target.exists() and not os.stat(target).st_mode & 0o222:  # made read-only on purpose: a replace would not ask
        raise FileRefused(
            f"{what} {path} is read-only: nothing was written; make it writable first "
            f"(chmod u+w {quoted(path)}) if it is meant to change"
        )
    return target


def staged(target: Path, data: bytes) -> Path:
    """A temporary file beside the target holding data, with the target's permissions; removed on any error."""
    mode = stat.S_IMODE(os.stat(target).st_mode) if target.exists() else new_file_mode()
    descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())  # a full disk may only say so here
        os.chmod(temporary, mode)
    except BaseException:  # Ctrl-C included: no temporary file is left behind; write_files names an OSError
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def write_files(contents: dict[Path | str, str], what: str = "the file") -> None:
    """Write every file's text (UTF-8) or none: all are staged beside their targets before any is replaced, and a
    replace that fails puts the ones already replaced back. FileRefused names what failed."""
    for path, content in contents.items():
        if where := unencodable(content):
            raise FileRefused(f"{what} {path} holds {where}: remove it. The file is unchanged")
    data = [(Path(path), writable_target(Path(path), what), content.encode()) for path, content in contents.items()]
    temporaries: list[tuple[Path, Path]] = []
    try:
        for _, target, payload in data:
            temporaries.append((staged(target, payload), target))
        old = {target: target.read_bytes() if target.exists() else None for _, target in temporaries}
        done: list[Path] = []
        try:
            for temporary, target in temporaries:
                os.replace(temporary, target)
                done.append(target)
        except BaseException:
            for target in done:  # put back what was there, so the set stays as it was
                if old[target] is None:
                    target.unlink(missing_ok=True)
                else:
                    os.replace(staged(target, old[target]), target)
            raise
    except OSError as error:
        names = ", ".join(str(path) for path, *_ in data)
        raise FileRefused(
            f"{what} {names} cannot be written ({error.strerror or error}); they are unchanged. Free "
            "space or fix the permissions, then run the command again"
        ) from None
    finally:
        for temporary, _ in temporaries:
            temporary.unlink(missing_ok=True)


def write_text(path: Path | str, text: str, what: str = "the file") -> None:
    """Write text as UTF-8 atomically: on any error the file is as it was. FileRefused names what failed."""
    write_files({path: text}, what)
