#!/usr/bin/env python3
"""What ncu launches for call N-k of a launch-mode run: replays section N's cells (ncu_launch.inner_cell_ids) up to
call k, runs it in nsight's own session and exits 0; 3 when the cells ended before it, 4 when a cell failed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell
from ncu_launch import SECTION_ONE_NAMES, ProfiledCalls, inner_cell_ids, load_cells, load_nsight  # plumbing: on path

from plumbing.cells import SETUP_HELPERS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="the kernel's scratch folder for launch mode")
    parser.add_argument("--call", required=True, help="the profiled call: <section>-<k>")
    args = parser.parse_args(argv)
    section, cells = int(args.call.split("-")[0]), load_cells()
    shell, calls = InteractiveShell.instance(), ProfiledCalls(args.work, "inner", target=args.call)
    sources = {cell["id"]: cell["source"] for cell in cells}
    for cell_id in inner_cell_ids(cells, section):
        calls.where = (section, cell_id)
        result = shell.run_cell(sources[cell_id], store_history=False)
        if calls.done:  # its call ran under ncu (InnerDone stopped the cell)
            return 0
        if not result.success:
            print(f"[launch inner] cell {cell_id} failed before call {args.call}", file=sys.stderr)
            return 4
        if cell_id == SETUP_HELPERS:  # nsight loaded for launch mode before section 1's `import nsight`
            load_nsight(calls)
    missing = [name for name in SECTION_ONE_NAMES if name not in shell.user_ns]
    print(f"[launch inner] the cells ended before call {args.call} (unbound: {missing})", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
