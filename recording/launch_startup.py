"""Launch mode in the notebook's kernel: IPython runs this file at kernel start because recording/run_launch_mode
sets PYTHONSTARTUP to it (a plain `python` running a script never reads PYTHONSTARTUP, so ncu's children do not).

Section 1 runs as written but decides for Nsight Compute in launch mode (the ncu in NSPY_TUTORIAL_LAUNCH_NCU), nsight is
imported with nothing loaded, and then every profiled call runs under that ncu in a child (ncu_launch.py). Any
failure here stops the cell it happens in, never passes silently: run_launch_mode also sets
NSPY_TUTORIAL_PROFILER=ncu, so a kernel without this layer stops in section 1 instead of measuring with CUPTI.
"""

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(os.environ["NSPY_LAUNCH_WING"])))  # recording/, set by run_launch_mode

import ncu_launch  # noqa: E402

from plumbing.cells import section_of  # noqa: E402


class LaunchLayer:
    """The kernel's hooks: which cell runs (for the call keys), section 1's decision, the patches once nsight is in."""

    def __init__(self, shell, ncu: str, out: Path):
        self.shell, self.ncu = shell, ncu
        self.ids = {cell["source"]: cell["id"] for cell in ncu_launch.load_cells() if cell["type"] == "code"}
        work = Path(tempfile.mkdtemp(prefix="nspy-launch-"))  # the frames handed to the inners: never kept
        self.calls = ncu_launch.ProfiledCalls(work, "outer", ncu=ncu, out=out)
        self.installed = False
        os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"
        out.mkdir(parents=True, exist_ok=True)
        ncu_launch.query_t4_metrics(ncu, out)
        ncu_launch.NcuGuard(ncu).install()
        shell.events.register("pre_run_cell", self.before)
        shell.events.register("post_run_cell", self.after)

    def before(self, info) -> None:
        cell_id = self.ids.get(info.raw_cell)
        self.calls.where = (section_of(cell_id) if cell_id else None, cell_id)
        namespace = self.shell.user_ns
        if "nsight_compute_packages" in namespace and namespace["nsight_compute_packages"] is not self.packages:
            self.decide = namespace["NCU_DECISION"], namespace["ENVIRONMENT"]
            namespace["nsight_compute_packages"] = self.packages

    def packages(self, environ=os.environ):
        """Section 1's install loop in launch mode: nothing to install; Nsight Compute is the launch-mode ncu."""
        decision, environment = self.decide
        folder = str(Path(self.ncu).parent)
        environ["PATH"] = os.pathsep.join([folder, *(p for p in environ["PATH"].split(os.pathsep) if p != folder)])
        decision.update(use_ncu=True, reason="", done=True)
        environment["ncu_mode"] = ncu_launch.MODE
        print(f"Nsight Compute at {self.ncu}, in launch mode: {ncu_launch.MODE}")
        yield from ()

    def after(self, result) -> None:
        if "nsight" not in sys.modules:  # settle_backend drops the setting; nsight must load nothing at import
            os.environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"
        elif not self.installed:
            from nsight import tools_manager

            ncu_launch.check_nsight_internals()
            self.calls.install()
            tools_manager._active_tool = tools_manager.Tool.NCU  # measuring with ncu; it runs each call's process
            self.installed = True


LaunchLayer(get_ipython(), os.environ["NSPY_TUTORIAL_LAUNCH_NCU"], Path(os.environ["NSPY_TUTORIAL_OUT"]))  # noqa: F821
