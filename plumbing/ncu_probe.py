"""Can nsight profile one kernel with Nsight Compute in a fresh process? Prints one JSON line.

    python ncu_probe.py OUTPUT_PREFIX

Section 1 runs this (embedded in the notebook as PROBE_SCRIPT) before it commits the notebook's own process to
Nsight Compute: once loaded, Nsight Compute stays, and CUPTI cannot be switched on after it. The line says how far
the probe got ("stage") and what stopped it ("error").
"""

import json
import math
import shutil
import sys


def check_kernel_times(times):
    """The probe kernel's measured times, refused unless there is one and each is a finite time above 0.

    A time of 0 or NaN means Nsight Compute attached but measured nothing: committing to it would fail later.
    """
    if not times or not all(math.isfinite(t) and t > 0 for t in times):
        raise RuntimeError(f"the probe kernel measured {times}")
    return times


def main():
    report = {"ncu": shutil.which("ncu"), "stage": "import nsight", "error": ""}
    try:
        import nsight
        from nsight.collection import ncu as nsight_ncu

        if nsight_ncu.injection_load_error is not None:
            raise nsight_ncu.injection_load_error
        report["stage"] = "import torch"
        import torch

        report["stage"] = "profile one kernel"

        quiet = nsight.VerbosityLevel.SILENT

        @nsight.analyze.kernel(runs=1, thermal_mode="off", output_prefix=sys.argv[1], verbosity=quiet)
        def probe(n):
            x = torch.ones(n, device="cuda")
            with nsight.annotate("probe"):
                x * 2.0

        check_kernel_times(probe(1 << 16).to_dataframe().AvgValue.tolist())
        report["stage"] = "done"
    except BaseException as error:  # noqa: BLE001 - every failure is the answer, reported in the line
        report["error"] = f"{type(error).__name__}: {error}"
    print(json.dumps(report))


if __name__ == "__main__":
    main()
