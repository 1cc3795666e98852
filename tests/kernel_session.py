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
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_client.manager import KernelManager
from traitlets.config import Config

READY_TIMEOUT_S = 300  # a 2-core machine shared with other test runs can take a while to import ipykernel


def ends_soon(pid: int, within_s: float = 5.0) -> bool:
    """Whether a process ends within a few seconds: a SIGKILL sent to a process group reaches each member
    asynchronously, so a helper may still be listed just after its parent was reaped."""
    deadline = time.monotonic() + within_s
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def running(pid: int) -> bool:
    """Whether a process is alive (a zombie, killed and not yet reaped, counts as ended)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class CellError(Exception):
    """A cell failed the way that stops Run all (its reply's status is 'error'): ename, evalue, what it printed."""

    def __init__(self, ename: str, evalue: str, stdout: str):
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue, self.stdout = ename, evalue, stdout


@dataclass
class CellRun:
    """What a front end gets from one cell: streams, error outputs (ename, evalue, traceback) and the reply."""

    status: str = ""
    stdout: str = ""
    stderr: str = ""
    errors: list[dict] = field(default_factory=list)
    reply: dict = field(default_factory=dict)

    @property
    def looks_failed(self) -> bool:
        """What the front end shows as a failed cell: an error output (the traceback in its error style)."""
        return bool(self.errors)


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
        """Execute code; return its stdout. Raise CellError if it failed the way that stops Run all."""
        done = self.execute(code, timeout=timeout)
        if done.status == "error":
            content = done.reply["content"]
            raise CellError(content.get("ename", ""), content.get("evalue", ""), done.stdout)
        return done.stdout

    def execute(self, code: str, timeout: float = 120, cell_id: str | None = None) -> CellRun:
        """Execute code as a front end does, with the cell's id in the request's metadata where given."""
        metadata = {"cellId": cell_id} if cell_id else {}
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": True}  # fmt: skip
        message = self.client.session.msg("execute_request", content, metadata=metadata)
        self.client.shell_channel.send(message)
        msg_id, done, deadline = message["header"]["msg_id"], CellRun(), time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the cell did not finish within {timeout} s")
            output = self.client.get_iopub_msg(timeout=remaining)
            if output["parent_header"].get("msg_id") != msg_id:
                continue
            kind, body = output["header"]["msg_type"], output["content"]
            if kind == "stream":
                setattr(done, body["name"], getattr(done, body["name"]) + body["text"])
            elif kind == "error":
                done.errors.append(body)
            elif kind == "status" and body["execution_state"] == "idle":
                break
        while True:
            reply = self.client.get_shell_msg(timeout=max(deadline - time.monotonic(), 1))
            if reply["parent_header"].get("msg_id") == msg_id:
                done.reply, done.status = reply, reply["content"]["status"]
                return done

    def value(self, expression: str):
        """The JSON value of an expression evaluated in the kernel, passed back in a file written for the purpose
        (never read out of what the cell printed)."""
        answer = Path(self._parts["folder"]) / "value.json"
        answer.unlink(missing_ok=True)
        write = f"_pathlib.Path({str(answer)!r}).write_text(_json.dumps({expression}, default=str))"
        self.run(f"# @title test probe\nimport json as _json\nimport pathlib as _pathlib\n{write}")
        return json.loads(answer.read_text())

    def close(self) -> None:
        """Kill and reap the kernel (idempotent)."""
        self._finalizer()
