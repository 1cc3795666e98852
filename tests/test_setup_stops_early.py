"""Section 1 stops early, as Run all does (at the first cell that raises), on simulated machines (tests/fake_env.py:
fake nvidia-smi, apt-get, dpkg and pip that record each call): no GPU, a profiler that cannot be had, a setting that
names no usable Nsight Compute or CUPTI folder. Each stops with the setting's name and the fix, before any install.
"""

from __future__ import annotations

import nbformat
import pytest
from fake_env import FakeMachine, clean_environment
from kernel_session import KernelSession
from support import NOTEBOOK, section_code_cells

from plumbing.cells import GPU_CHECK, SECTION_ONE_CELLS, SETUP_HELPERS

SECTION_1 = section_code_cells(nbformat.read(NOTEBOOK, as_version=4), 1)
NCU_CELL = SECTION_ONE_CELLS["ncu"]  # chooses the ncu: a setting it cannot honour stops Run all there


def run_all(tmp_path, **machine_options):
    """Section 1's cells in order until one raises: (the cell that raised, its error and output, the machine)."""
    machine = FakeMachine(tmp_path / "machine", **machine_options)
    with KernelSession(machine.build(), machine.root / "cwd", base_env=clean_environment()) as kernel:
        for cell in SECTION_1:
            done = kernel.execute(cell.source, timeout=300)
            if done.status == "error":
                content = done.reply["content"]
                return cell.id, f"{content.get('ename')}: {content.get('evalue', '')}", machine
    return None, "", machine


def test_without_a_gpu_run_all_stops_at_the_first_cell_before_any_install(tmp_path):
    stopped_at, error, machine = run_all(tmp_path, gpu=None)
    assert stopped_at == GPU_CHECK and "No NVIDIA GPU is visible" in error and "T4 GPU" in error, error
    assert machine.apt_installs() == [] and machine.calls("pip") == [], "nothing may be installed without a GPU"


def test_profiler_ncu_that_cannot_be_had_stops_before_any_pip_install(tmp_path):
    stopped_at, error, machine = run_all(tmp_path, apt="unreachable", env={"NSPY_TUTORIAL_PROFILER": "ncu"})
    assert stopped_at == NCU_CELL and "NSPY_TUTORIAL_PROFILER=ncu, but there is no ncu 2026.2.1+" in error
    assert "apt-get update failed" in error and "NCU_PATH" in error, "the message must say what failed and what to do"
    assert machine.calls("pip") == [], "the pins must not be installed for a profiler that cannot be had"


@pytest.mark.parametrize(
    ("ncu_path", "said"), [("/bin/true", "/bin/true is not Nsight Compute"), ("old", "is Nsight Compute 2025.1.1")]
)
def test_an_ncu_path_that_is_no_current_nsight_compute_is_named_not_passed_over(tmp_path, ncu_path, said):
    options = {"ncu_path_version": "2025.1.1"} if ncu_path == "old" else {"env": {"NCU_PATH": ncu_path}}
    stopped_at, error, machine = run_all(tmp_path, **options)
    assert stopped_at == NCU_CELL and error.startswith("ValueError: NCU_PATH=") and said in error, error
    assert "or unset it" in error
    assert machine.apt_installs() == [], "a wrong NCU_PATH must be said, not passed over for apt-get"


def test_a_cupti_folder_setting_that_names_a_file_stops_with_the_setting(tmp_path):
    a_file = tmp_path / "cupti.txt"
    a_file.write_text("not a folder")
    stopped_at, error, machine = run_all(tmp_path, env={"NSPY_TUTORIAL_CUPTI_DIR": str(a_file)})
    assert stopped_at == SETUP_HELPERS and f"NSPY_TUTORIAL_CUPTI_DIR={a_file}" in error and "is a file" in error
    assert a_file.read_text() == "not a folder"
    assert machine.apt_installs() == [] and machine.calls("pip") == []
