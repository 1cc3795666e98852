"""What a library module of scripts/ (recordings.py, ncu_launch.py) says when it is run as a script."""

from __future__ import annotations

import sys


def not_a_script(module: str, scripts: tuple[str, ...], argv: list[str] | None = None) -> int:
    """Say that `module` is a module, not a script, and which scripts to run instead: 0 for --help, else 2."""
    argv = sys.argv[1:] if argv is None else argv
    asked_for_help = argv in (["--help"], ["-h"])
    print(
        f"usage: scripts/{module} is a module that other scripts import, not a script: it does nothing by itself. "
        f"Run {' or '.join(f'scripts/{name}' for name in scripts)} instead (each answers --help).",
        file=sys.stdout if asked_for_help else sys.stderr,
    )
    return 0 if asked_for_help else 2
