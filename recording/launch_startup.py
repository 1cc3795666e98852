"""Launch mode in the notebook's kernel, run at its start through PYTHONSTARTUP (set by recording/run_launch_mode;
ncu's children, plain scripts, never read it). Section 1 decides for the ncu in NSPY_TUTORIAL_LAUNCH_NCU, nsight is
imported with nothing loaded, and each profiled call runs under that ncu in a child (ncu_launch.py). A failure stops
its cell; NSPY_TUTORIAL_PROFILER=ncu makes a kernel without this layer stop in section 1 rather than use CUPTI.
"""

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(os.environ["NSPY_LAUNCH_WING"])))  # recording/, set by run_launch_mode

import ncu_launch  # noqa: E402

from plumbing.cells import section_of  # noqa: E402
from plumbing.folders import prepare_output_dir  # noqa: E402


class LaunchLayer:
    """The kernel's hooks: which cell runs (for the call keys), section 1's decision, nsight loaded for launch mode."""

    def __init__(self, shell, ncu: str, out: Path):
        self.shell, self.ncu, self.decided = shell, ncu, False
        self.ids = {cell["source"]: cell["id"] for cell in ncu_launch.load_cells() if cell["type"] == "code"}
        work = Path(tempfile.mkdtemp(prefix="nspy-launch-"))  # the frames handed to the children: never kept
        self.calls = ncu_launch.ProfiledCalls(work, "outer", ncu=ncu, out=out)
        prepare_output_dir(out)  # made and marked by the folder rules, as the harness cell will find it
        ncu_launch.query_t4_metrics(ncu, out)
        ncu_launch.NcuGuard(ncu).install()
        shell.events.register("pre_run_cell", self.before)
        shell.events.register("post_run_cell", self.after)

    def before(self, info) -> None:
        if cell_id := self.ids.get(info.raw_cell):  # else a cell run inside one (%%needs_ncu): still that one's
            self.calls.where = (section_of(cell_id), cell_id)
        namespace = self.shell.user_ns
        # once section 1's helpers exist (a bound method is made anew at each access: compare with ==, not is)
        if ncu_launch.DECISION in namespace and namespace[ncu_launch.DECISION] != self.decide:
            self.environment = namespace["ENVIRONMENT"]
            namespace[ncu_launch.DECISION] = self.decide

    def decide(self, environ=os.environ):
        """Section 1's choice in launch mode: Nsight Compute, the launch-mode ncu first on PATH; nothing installed."""
        self.shell.user_ns["put_first_on_path"](Path(self.ncu).parent, environ)  # section 1's own helper
        self.environment["ncu_mode"] = ncu_launch.MODE
        said = f"launch mode: {ncu_launch.MODE}"
        self.environment.setdefault("ncu_attempts", []).append({"ncu": self.ncu, "outcome": "ok", "said": said})
        print(f"Nsight Compute at {self.ncu}, in {said}")
        self.decided = True
        return True, ""

    def after(self, result) -> None:
        if self.decided and "nsight" not in sys.modules:  # before the cell that imports nsight: loaded, patched
            ncu_launch.load_nsight(self.calls)


LaunchLayer(get_ipython(), os.environ["NSPY_TUTORIAL_LAUNCH_NCU"], Path(os.environ["NSPY_TUTORIAL_OUT"]))  # noqa: F821
