"""Section 10: profile one workload with ncu's whole sections (nsight's reports carry no rule results), always with
`--clock-control none` as nsight does, and read the report with ncu_report."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from plumbing.harness import ENVIRONMENT

NCU_SECTIONS = ("SpeedOfLight", "WarpStateStats")
SUMMARY = {  # the report's name for each line of the summary
    "duration (ns)": "gpu__time_duration.sum",
    "compute (SM) throughput %": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory throughput %": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "DRAM throughput %": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "warp cycles per issued instruction": "smsp__average_warp_latency_per_inst_issued.ratio",
}
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")
NOT_A_STALL = ("selected",)  # the cycles a warp spent issuing: listed with the reasons, but not a wait


def profile_with_sections(report, workload, kernel):
    """Run `workload` (Python that defines `work`) under section 1's ncu, which profiles the second launch of the
    kernel whose name holds `kernel` (the first warms up) into `report`."""
    report = Path(report)
    report.parent.mkdir(parents=True, exist_ok=True)
    script = report.parent / "workload.py"
    script.write_text(f"import torch\n{workload}\nwork()\nwork()\ntorch.cuda.synchronize()\n")
    command = [ENVIRONMENT["ncu_path"], "--clock-control", "none", "--kernel-name", f"regex:{kernel}", "--launch-skip",
               "1", "--launch-count", "1", *(word for section in NCU_SECTIONS for word in ("--section", section)),
               "-f", "-o", str(report.with_suffix("")), sys.executable, str(script)]  # fmt: skip
    # A new ncu sets up its own injection: leave out what this process's Nsight Compute put in the environment.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NV_COMPUTE_PROFILER", "NVTX_INJECTION"))}
    started = time.perf_counter()
    done = subprocess.run(command, env=clean, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not report.exists():
        last_lines = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
        raise RuntimeError(f"ncu exited with {done.returncode} and wrote no report: {last_lines}")
    print(f"ncu with sections {', '.join(NCU_SECTIONS)}: {time.perf_counter() - started:.1f} s, Python start included")


def headline(message):
    """A rule's title, or where it has none the first sentence of its advice (links to sections as their names)."""
    return message["title"] or re.sub(r"@\w+:[^:@]+:([^@]+)@", r"\1", message["message"]).split(". ")[0].strip()


def read_sections(report_path):
    """The profiled launch: its kernel, summary lines, rule results and stall reasons (largest first)."""
    import ncu_report
    import pandas as pd

    report = ncu_report.load_report(str(report_path))
    launch = report.range_by_idx(0).action_by_idx(0)
    summary = {line: launch[name].value() for line, name in SUMMARY.items() if launch.metric_by_name(name)}
    messages = [(r["section_identifier"], r["rule_message"]) for r in launch.rule_results_as_dicts()]
    rules = [f"[{ncu_report.MsgType(m['type']).name}] {section}: {headline(m)}" for section, m in messages]
    reasons = {m[1]: launch[m[0]].value() for m in map(STALL.fullmatch, launch.metric_names()) if m}
    stalls = pd.Series({k: v for k, v in reasons.items() if k not in NOT_A_STALL}, name="cycles per issued instruction")
    return {"kernel": launch.name(), "summary": summary, "rules": rules, "stalls": stalls.sort_values(ascending=False)}
