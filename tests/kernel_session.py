"""A real Jupyter kernel on IPC files (not TCP ports); close(), a failed start and GC kill its process group."""

import json
import os
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

from jupyter_client.manager import KernelManager
from traitlets.config import Config


def running(pid: int) -> bool:  # a zombie counts as ended
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def ends_soon(pid: int, within_s: float = 5.0) -> bool:
    """Whether a process ends within a few seconds (a SIGKILL reaches a group's members asynchronously)."""
    deadline = time.monotonic() + within_s
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


class CellError(Exception):
    """A cell failed the way that stops Run all (its reply's status is 'error')."""

    def __init__(self, ename: str, evalue: str, stdout: str):
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue, self.stdout = ename, evalue, stdout


def _shut_down(parts: dict) -> None:
    try:
        if parts["client"] is not None:
            parts["client"].stop_channels()
        if parts["manager"].has_kernel:
            parts["manager"].shutdown_kernel(now=True)  # SIGKILL to the process group, then reaped
    finally:
        shutil.rmtree(parts["folder"], ignore_errors=True)


class KernelSession:
    """A python3 kernel started with env on top of base_env (default: this process's environment)."""

    def __init__(self, env: dict[str, str], cwd: Path, base_env: dict | None = None):
        folder = Path(tempfile.mkdtemp(prefix="nspy-k-"))  # short: socket paths must stay under ~100 characters
        config = Config({"KernelManager": {"transport": "ipc", "ip": str(folder / "k")}})
        self.manager = KernelManager(kernel_name="python3", config=config)
        self._parts = {"manager": self.manager, "folder": folder, "client": None}
        self.close = weakref.finalize(self, _shut_down, self._parts)  # idempotent
        try:
            environment = {**(os.environ if base_env is None else base_env), **env}
            self.manager.start_kernel(env=environment, cwd=str(cwd))
            self.client = self._parts["client"] = self.manager.client()
            self.client.start_channels()
            self.client.wait_for_ready(timeout=300)  # a busy 2-core machine can take a while to import ipykernel
        except BaseException:
            self.close()
            raise

    def run(self, code: str, timeout: float = 120) -> str:  # stdout; CellError where Run all stops
        done = self.execute(code, timeout=timeout)
        if done.status == "error":
            raise CellError(done.content.get("ename", ""), done.content.get("evalue", ""), done.stdout)
        return done.stdout

    def execute(self, code: str, timeout: float = 120) -> SimpleNamespace:
        """Execute code as Colab does (no cell id): streams, results (text/plain), errors, the reply."""
        done = SimpleNamespace(stdout="", stderr="", results=[], errors=[])

        def receive(output: dict) -> None:
            kind, body = output["header"]["msg_type"], output["content"]
            if kind == "stream":
                setattr(done, body["name"], getattr(done, body["name"]) + body["text"])
            elif kind in ("execute_result", "display_data"):
                done.results.append(body["data"].get("text/plain", ""))
            elif kind == "error":
                done.errors.append(body)

        reply = self.client.execute_interactive(
            code, store_history=True, allow_stdin=False, stop_on_error=True, timeout=timeout, output_hook=receive
        )
        done.content, done.status = reply["content"], reply["content"]["status"]
        return done

    def value(self, expression: str):
        """The JSON value of an expression in the kernel, passed back in a file written for the purpose."""
        answer = Path(self._parts["folder"]) / "value.json"
        answer.unlink(missing_ok=True)
        write = f"_pathlib.Path({str(answer)!r}).write_text(_json.dumps({expression}, default=str))"
        self.run(f"# @title test probe\nimport json as _json\nimport pathlib as _pathlib\n{write}")
        return json.loads(answer.read_text())
