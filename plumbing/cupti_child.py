"""Section 9's CUPTI child: profile one benchmark under nsight's CUPTI backend in a fresh Python.

    python cupti_child.py BENCHMARK_FILE FUNCTION SIZES_JSON OUTPUT_PREFIX

BENCHMARK_FILE holds the benchmark function's own source (the notebook writes it with inspect.getsource); it
runs with torch, nsight and pandas imported. Environment: NSPY_TUTORIAL_LIBCUPTI, the libcupti.so.13 to load
before anything else. Writes OUTPUT_PREFIX/child_result.json: the rows, the wall time, the tool and the libcupti
that CUPTI bound to. The notebook's section 9 embeds this file's text and runs it; nothing is substituted into it.
"""

import ctypes
import json
import os
import sys
import time
from pathlib import Path


def add_kernel_times(first, second):
    """nsight's combine_kernel_metrics: one call that launches two kernels (cuBLAS may) is timed as their sum."""
    return first + second


# nsight.analyze.kernel's arguments for the child, besides its output folder and verbosity: section 5's five runs,
# no thermal pauses, and the kernels of one call added up.
PROFILING_OPTIONS = {"runs": 5, "thermal_mode": "off", "combine_kernel_metrics": add_kernel_times}


def child_result(stacked, elapsed, tool, environ=os.environ):
    """What the child writes: the rows, the wall time, the tool, and the libcupti nsight.activate handed to NVTX
    (NVTX_INJECTION64_PATH: the library in use, which the parent checks against the one it asked to preload)."""
    rows = stacked[["Annotation", "n", "AvgValue", "RelativeStdDevPct", "Kernel"]].to_dict("records")
    return {"rows": rows, "wall_s": elapsed, "tool": tool, "libcupti": environ.get("NVTX_INJECTION64_PATH", "")}


def main(argv):
    benchmark_file, function_name, sizes = argv[0], argv[1], json.loads(argv[2])
    ctypes.CDLL(os.environ["NSPY_TUTORIAL_LIBCUPTI"], mode=os.RTLD_GLOBAL)  # first: CUPTI binds to this copy
    import nsight

    nsight.activate(nsight.Tool.CUPTI)
    import pandas as pd
    import torch

    namespace = {"nsight": nsight, "torch": torch, "pd": pd}
    exec(compile(Path(benchmark_file).read_text(), benchmark_file, "exec"), namespace)
    quiet = nsight.VerbosityLevel.SILENT
    timed = nsight.analyze.kernel(**PROFILING_OPTIONS, output_prefix=argv[3], verbosity=quiet)(namespace[function_name])
    clock = time.perf_counter()
    stacked = pd.concat([timed(n).to_dataframe() for n in sizes])
    elapsed = time.perf_counter() - clock
    result = child_result(stacked, elapsed, str(nsight.get_active_tool()))  # read before deactivate restores it
    nsight.deactivate()
    Path(argv[3], "child_result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
