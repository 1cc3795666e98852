"""The whole notebook executed for real with nbclient on a machine without a GPU.

It must stop at its first code cell with the message that tells a Colab user what to do, and it
must not get as far as installing anything. apt-get, dpkg, pip and `python -m pip` are shimmed to
record every call, and nvidia-smi is shimmed to list no GPU, so this holds on any machine.
"""

from __future__ import annotations

import os
import sys
import textwrap

import nbformat
import pytest
from kernel_session import ipc_config
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from notebook_ast import code_cells
from support import NOTEBOOK

RECORDER = textwrap.dedent(
    """\
    #!/bin/sh
    echo "$(basename "$0") $*" >> "{log}"
    exit 1
    """
)
PIP_MODULE = 'import sys\nopen({log!r}, "a").write("python -m pip " + " ".join(sys.argv[1:]) + "\\n")\nsys.exit(1)\n'


def make_shims(folder, log):
    """Installer shims first on PATH and PYTHONPATH; nvidia-smi that sees no GPU."""
    bin_dir, py_dir = folder / "bin", folder / "py" / "pip"
    bin_dir.mkdir(parents=True)
    py_dir.mkdir(parents=True)
    for name in ("apt-get", "apt", "dpkg", "pip", "pip3", "ncu"):
        (bin_dir / name).write_text(RECORDER.format(log=log))
        (bin_dir / name).chmod(0o755)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed: no devices were found'\nexit 9\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    (py_dir / "__init__.py").write_text("")
    (py_dir / "__main__.py").write_text(PIP_MODULE.format(log=str(log)))
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(folder / "py"), os.environ.get("PYTHONPATH")])),
    }


@pytest.fixture(scope="module")
def shimmed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shims")
    log = folder / "installs.log"
    log.touch()
    return folder, log, make_shims(folder, log)


@pytest.fixture(scope="module")
def cpu_run(shimmed, tmp_path_factory):
    _, log, env = shimmed
    out = tmp_path_factory.mktemp("cpu_run")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(out)}}, config=ipc_config(out)
    )
    saved = {key: os.environ.get(key) for key in (*env, "NSPY_TUTORIAL_OUT")}
    os.environ.update(env, NSPY_TUTORIAL_OUT=str(out / "nspy"))  # the kernel inherits this environment
    try:
        with pytest.raises(CellExecutionError) as raised:
            client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {"nb": nb, "error": raised.value, "log": log, "out": out}


def test_cpu_run_stops_with_the_change_runtime_message(cpu_run):
    message = str(cpu_run["error"])
    assert "Runtime > Change runtime type > T4 GPU" in message, f"unexpected stop: {message[-800:]}"
    assert "Nothing has been installed" in message


def test_cpu_run_stops_at_the_first_code_cell(cpu_run):
    cells = code_cells(cpu_run["nb"])
    first_errors = [o for o in cells[0].outputs if o.output_type == "error"]
    assert first_errors and first_errors[0].ename == "RuntimeError", "the first code cell must raise the message"
    ran_later = [c.get("id") for c in cells[1:] if c.execution_count is not None or c.outputs]
    assert not ran_later, f"cells after the GPU check ran on a CPU machine: {ran_later}"


def test_cpu_run_calls_no_installer(cpu_run):
    calls = cpu_run["log"].read_text()
    assert calls == "", f"installers ran on a machine without a GPU:\n{calls}"
    assert not (cpu_run["out"] / "nspy").exists(), "nothing, not even the output folder, should be created"


def test_installer_shims_record_calls(shimmed, tmp_path):
    """The shims catch what the notebook would run, so an empty log above means something."""
    import subprocess

    folder, _, env = shimmed
    log = tmp_path / "probe.log"
    probe_env = make_shims(tmp_path / "probe", log)
    full_env = {**os.environ, **probe_env}
    subprocess.run(["apt-get", "install", "-y", "x"], env=full_env, check=False)
    subprocess.run([sys.executable, "-m", "pip", "install", "x"], env=full_env, check=False)
    assert log.read_text().splitlines() == ["apt-get install -y x", "python -m pip install x"]
