"""A real Jupyter kernel that runs notebook cells for the tests (nbclient/jupyter_client, no mocks)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jupyter_client.manager import KernelManager

RESULT_MARK = "@@RESULT@@"


class CellError(Exception):
    """A cell raised in the kernel: ename, evalue and what the cell printed before."""

    def __init__(self, ename: str, evalue: str, stdout: str):
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue, self.stdout = ename, evalue, stdout


class KernelSession:
    def __init__(self, env: dict[str, str] | None = None, cwd: Path | None = None):
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env={**os.environ, **(env or {})}, cwd=str(cwd or Path.cwd()))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)

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
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
