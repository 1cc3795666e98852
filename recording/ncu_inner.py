#!/usr/bin/env python3
"""What ncu launches for one profiled call N-k of recording/record_ncu.py (never run by hand): replays section N up to
call k (ncu_launch.inner_plan), runs call k with nsight's own session, exits 0; 3 when the cells ended before it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="the outer recorder's scratch folder")
    parser.add_argument("--call", required=True, help="the profiled call: <section>-<k>")
    args = parser.parse_args(argv)
    os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # before nsight is imported: ncu launched this process
    from ncu_launch import InnerDone, ProfiledCalls, check_nsight_internals, inner_plan, replay
    from recordings import load_cells

    check_nsight_internals()
    section = int(args.call.split("-")[0])
    try:
        calls = ProfiledCalls(args.work, "inner", target=args.call)
        replay(inner_plan(load_cells(), section), calls, log=lambda *_: None)  # what it prints: the call's output
    except InnerDone:
        return 0
    print(f"[record inner] section {section}'s cells ended before profiled call {args.call}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
