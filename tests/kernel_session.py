"""A real Jupyter kernel that runs notebook cells for the tests (nbclient/jupyter_client, no mocks).

Kernels talk over IPC sockets (files in a private folder), not TCP ports: on a busy machine where other test
runs start kernels too, a TCP port picked as free can be taken before the kernel binds it ('Address already in
use', then 'Kernel didn't respond'). A kernel never outlives its session: close() (also on leaving a `with`
block, on a failed start, at garbage collection and at interpreter exit) kills it with its process group,
reaps it and removes the socket folder.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path

from jupyter_client.manager import KernelManager
from traitlets.config import Config

RESULT_MARK = "@@RESULT@@"
READY_TIMEOUT_S = 300  # a 2-core machine shared with other test runs can take a while to import ipykernel


def running(pid: int) -> bool:
    """Whether a process is alive (a zombie, killed and not yet reaped, counts as ended)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class CellError(Exception):
    """A cell raised in the kernel: ename, evalue and what the cell printed before."""

    def __init__(self, ename: str, evalue: str, stdout: str):
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue, self.stdout = ename, evalue, stdout


def ipc_config(folder: Path) -> Config:
    """Configuration that puts a kernel's sockets in folder as IPC files (for nbclient's NotebookClient too).

    Unix socket paths are limited to about 100 characters: keep folder short.
    """
    return Config({"KernelManager": {"transport": "ipc", "ip": str(Path(folder) / "k")}})


def ipc_kernel_manager() -> tuple[KernelManager, Path]:
    """A python3 KernelManager on IPC sockets in a new private folder."""
    folder = Path(tempfile.mkdtemp(prefix="nspy-k-"))
    return KernelManager(kernel_name="python3", config=ipc_config(folder)), folder


def _shut_down(parts: dict) -> None:
    """Stop a session's kernel and reap it; safe to call on a half-started session."""
    client, manager = parts.get("client"), parts["manager"]
    try:
        if client is not None:
            client.stop_channels()
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)  # SIGKILL to the process group, then wait() reaps it
    finally:
        shutil.rmtree(parts["folder"], ignore_errors=True)


class KernelSession:
    """A kernel started with env on top of base_env (default: this process's environment)."""

    def __init__(self, env: dict[str, str] | None = None, cwd: Path | None = None, base_env: Mapping | None = None):
        self.manager, folder = ipc_kernel_manager()
        self._parts = {"manager": self.manager, "folder": folder, "client": None}
        self._finalizer = weakref.finalize(self, _shut_down, self._parts)
        try:
            environment = {**(os.environ if base_env is None else base_env), **(env or {})}
            self.manager.start_kernel(env=environment, cwd=str(cwd or Path.cwd()))
            self.client = self._parts["client"] = self.manager.client()
            self.client.start_channels()
            self.client.wait_for_ready(timeout=READY_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int | None:
        process = getattr(self.manager.provisioner, "process", None)
        return process.pid if process is not None else None

    def __enter__(self) -> KernelSession:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def run(self, code: str, timeout: float = 120) -> str:
        """Execute code; return its stdout. Raise CellError if it raised."""
        stdout, error = [], []

        def hook(message):
            kind, content = message["header"]["msg_type"], message["content"]
            if kind == "stream" and content["name"] == "stdout":
                stdout.append(content["text"])
            elif kind == "error":
                error.append((content["ename"], content["evalue"]))

        self.client.execute_interactive(code, output_hook=hook, timeout=timeout)
        if error:
            raise CellError(*error[0], "".join(stdout))
        return "".join(stdout)

    def value(self, expression: str):
        """The JSON value of an expression evaluated in the kernel.

        The probe is a folded '# @title' cell, so the notebook's section guard never skips or wraps it.
        """
        dump = f"print({RESULT_MARK!r} + _json.dumps({expression}, default=str))"
        probe = f"# @title test probe\nimport json as _json\n{dump}"
        out = self.run(probe)
        return json.loads(out.rsplit(RESULT_MARK, 1)[1])

    def close(self) -> None:
        """Kill and reap the kernel (idempotent)."""
        self._finalizer()
