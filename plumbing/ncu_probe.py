"""Can nsight profile one kernel with Nsight Compute in a fresh process? Writes OUTPUT_PREFIX/probe.json.

    python ncu_probe.py OUTPUT_PREFIX

Section 1 runs this (embedded in the notebook as PROBE_SCRIPT) before it commits the notebook's own process to
Nsight Compute: once loaded, Nsight Compute stays, and CUPTI cannot be switched on after it. probe.json says how far
the probe got ("stage") and what stopped it ("error"), in a file written for the purpose (the log holds the rest).
"""

import json
import math
import shutil
import sys
from pathlib import Path


def check_kernel_times(times):
    """The probe kernel's times, refused unless each is a finite time above 0: a time of 0 or NaN means Nsight
    Compute attached but measured nothing, and committing to it would fail later."""
    if not times or not all(math.isfinite(t) and t > 0 for t in times):
        raise RuntimeError(f"the probe kernel measured {times}")
    return times


def main(prefix):
    report = {"ncu": shutil.which("ncu"), "stage": "import nsight", "error": ""}
    try:
        import nsight

        if nsight.collection.ncu.injection_load_error is not None:
            raise nsight.collection.ncu.injection_load_error
        report["stage"] = "import torch"
        import torch

        report["stage"] = "profile one kernel"

        @nsight.analyze.kernel(runs=1, thermal_mode="off", output_prefix=prefix, verbosity=nsight.VerbosityLevel.SILENT)
        def probe(n):
            x = torch.ones(n, device="cuda")
            with nsight.annotate("probe"):
                x * 2.0

        check_kernel_times(probe(1 << 16).to_dataframe().AvgValue.tolist())
        report["stage"] = "done"
    except BaseException as error:  # noqa: BLE001 - every failure is the answer, reported in the file
        report["error"] = f"{type(error).__name__}: {error}"
    Path(prefix).mkdir(parents=True, exist_ok=True)
    Path(prefix, "probe.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
