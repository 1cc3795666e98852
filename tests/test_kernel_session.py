"""The test suite's kernels: they start on a busy machine without racing for TCP ports, and never outlive a test.

On a 2-core machine shared with other test runs, a TCP port that jupyter_client picked as free could be taken
before the kernel bound it ('ZMQError: Address already in use', then "Kernel didn't respond in 120 seconds"),
and the kernel that never answered was left running after the suite. These tests start real kernels.
"""

from __future__ import annotations

import time
from pathlib import Path

import kernel_session
import pytest
from kernel_session import CellError, KernelSession, running


def test_kernels_listen_on_ipc_files_in_a_private_folder_not_on_tcp_ports():
    with KernelSession() as session:
        info = session.manager.get_connection_info()
        assert info["transport"] == "ipc", "a TCP port picked as free can be taken by another run before the kernel"
        sockets = [f"{info['ip']}-{info[name]}" for name in ("shell_port", "iopub_port", "control_port", "hb_port")]
        assert all(Path(path).exists() for path in sockets), sockets
        assert session.run("print(6 * 7)") == "42\n"


def test_a_closed_session_leaves_no_kernel_process_and_no_socket_files():
    session = KernelSession()
    pid, folder = session.pid, Path(session.manager.ip).parent
    session.close()
    assert not running(pid), f"kernel process {pid} outlived its session"
    assert not folder.exists(), f"the socket folder {folder} was left behind"
    session.close()  # closing twice is harmless (fixtures and finalisers may both close)


def test_a_session_whose_block_raises_still_shuts_its_kernel_down():
    with pytest.raises(CellError), KernelSession() as session:
        pid = session.pid
        session.run("raise ValueError('set-up failed')")
    assert not running(pid), "a fixture whose set-up raised left its kernel running"


def test_a_kernel_that_never_answers_is_killed_and_reaped(tmp_path, monkeypatch):
    # A python3 kernel whose launcher hangs instead of starting ipykernel: wait_for_ready times out.
    (tmp_path / "ipykernel_launcher.py").write_text(
        f"import os, time\nopen({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\ntime.sleep(3600)\n"
    )
    monkeypatch.setattr(kernel_session, "READY_TIMEOUT_S", 3)  # time enough for the launcher to write its pid
    with pytest.raises(RuntimeError, match="didn't respond"):
        KernelSession(env={"PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    deadline = time.monotonic() + 10
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = int((tmp_path / "pid").read_text())
    assert not running(pid), f"the kernel that never answered (pid {pid}) is still running"
