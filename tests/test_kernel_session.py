"""The suite's kernels listen on IPC files, not TCP ports, and never outlive their session."""

from pathlib import Path

import pytest
from kernel_session import CellError, KernelSession, running


def test_a_kernel_listens_on_ipc_files_and_once_closed_leaves_no_process_and_no_files():
    session = KernelSession()
    info, pid = session.manager.get_connection_info(), session.pid
    sockets = [f"{info['ip']}-{info[name]}" for name in ("shell_port", "iopub_port", "control_port", "hb_port")]
    assert info["transport"] == "ipc" and all(map(Path.exists, map(Path, sockets))), info
    assert session.run("print(6 * 7)") == "42\n"
    with pytest.raises(CellError, match="ValueError: failed"):
        session.run("raise ValueError('failed')")
    session.close()
    assert not running(pid) and not Path(info["ip"]).parent.exists(), "the kernel or its sockets outlived close()"
    session.close()  # closing twice is harmless (fixtures and finalisers may both close)
