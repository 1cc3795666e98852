"""The suite's kernels listen on IPC files, not TCP ports, and never outlive their session: closed, failed in a
`with` block, or never answering."""

from __future__ import annotations

import time
from pathlib import Path

import kernel_session
import pytest
from kernel_session import CellError, KernelSession, running


def test_a_kernel_listens_on_ipc_files_and_a_failed_block_leaves_no_process_and_no_files():
    with pytest.raises(CellError), KernelSession() as session:
        info, pid = session.manager.get_connection_info(), session.pid
        sockets = [f"{info['ip']}-{info[name]}" for name in ("shell_port", "iopub_port", "control_port", "hb_port")]
        assert info["transport"] == "ipc" and all(map(Path.exists, map(Path, sockets))), info
        assert session.run("print(6 * 7)") == "42\n"
        session.run("raise ValueError('set-up failed')")
    assert not running(pid) and not Path(info["ip"]).parent.exists(), "the kernel or its sockets outlived its block"
    session.close()  # closing twice is harmless (fixtures and finalisers may both close)


def test_a_kernel_that_never_answers_is_killed_and_reaped(tmp_path, monkeypatch):
    (tmp_path / "ipykernel_launcher.py").write_text(  # a launcher that hangs instead of starting ipykernel
        f"import os, time\nopen({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\ntime.sleep(3600)\n"
    )
    monkeypatch.setattr(kernel_session, "READY_TIMEOUT_S", 3)
    with pytest.raises(RuntimeError, match="didn't respond"):
        KernelSession(env={"PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    deadline = time.monotonic() + 10
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(int((tmp_path / "pid").read_text())), "the kernel that never answered is still running"
