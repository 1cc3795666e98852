"""Section 1 stops early: after "no GPU", and when the profiler asked for cannot be had, no later cell installs.

Run all stops at the cell that raises. Here a learner goes on by hand: every later cell of section 1 runs in the
same real kernel, on a simulated machine (tests/fake_env.py: fake nvidia-smi, apt-get, dpkg and pip that record
each call). Nothing may reach apt-get or pip, and each cell says in one line why it does nothing. Settings that
name no usable Nsight Compute or CUPTI folder stop with the setting's name and the fix.
"""

from __future__ import annotations

import nbformat
import pytest
from fake_env import FakeMachine, clean_environment
from kernel_session import KernelSession
from support import NOTEBOOK, cell_by_id

from plumbing.cells import section_of

NB = nbformat.read(NOTEBOOK, as_version=4)
SECTION_1 = [cell.id for cell in NB.cells if cell.cell_type == "code" and section_of(cell.id) == 1]
INSTALLING_CELLS = ("s1-ncu-code", "s1-pip-code", "s1-cupti-code")


def run_by_hand(tmp_path, **machine_options):
    """Every section 1 cell in order, going on after errors: ({cell id: (ename or None, output)}, the machine)."""
    machine = FakeMachine(tmp_path / "machine", **machine_options)
    env = machine.build()
    results = {}
    with KernelSession(env, machine.root / "cwd", base_env=clean_environment()) as kernel:
        for cell_id in SECTION_1:
            done = kernel.execute(cell_by_id(NB, cell_id).source, timeout=300)
            ename = done.reply["content"].get("ename") if done.status == "error" else None
            evalue = done.reply["content"].get("evalue", "") if ename else ""
            results[cell_id] = (ename, done.stdout + evalue)
    return results, machine


def nothing_installed(machine: FakeMachine) -> None:
    assert machine.apt_installs() == [], f"apt-get installed {machine.apt_installs()} after section 1 stopped"
    assert machine.calls("pip") == [], "pip ran after section 1 stopped"


def test_without_a_gpu_no_later_cell_of_section_1_installs_and_each_says_why(tmp_path):
    results, machine = run_by_hand(tmp_path, gpu=None)
    assert results["gpu-check"][0] == "RuntimeError" and "No NVIDIA GPU is visible" in results["gpu-check"][1]
    nothing_installed(machine)
    for cell_id in INSTALLING_CELLS:
        printed = results[cell_id][1]
        assert "not done, because no NVIDIA GPU is visible" in printed, f"{cell_id} must say why: {printed!r}"
    assert (
        results["s1-import-code"][0] == "RuntimeError" and "section 1 stopped earlier" in results["s1-import-code"][1]
    )


def test_profiler_ncu_that_cannot_be_had_stops_before_any_pip_install(tmp_path):
    results, machine = run_by_hand(tmp_path, apt="unreachable", env={"NSPY_TUTORIAL_PROFILER": "ncu"})
    ename, said = results["s1-ncu-code"]
    assert ename == "RuntimeError" and "NSPY_TUTORIAL_PROFILER=ncu, but there is no usable Nsight Compute" in said
    assert "NCU_PATH" in said and "NSPY_TUTORIAL_PROFILER=auto" in said, "the message must say what to do"
    assert machine.calls("pip") == [], "the 190 MB of pins must not be installed for a profiler that cannot be had"
    for cell_id in ("s1-pip-code", "s1-cupti-code"):
        assert "not done, because NSPY_TUTORIAL_PROFILER=ncu" in results[cell_id][1], results[cell_id]


@pytest.mark.parametrize(
    ("ncu_path", "said"),
    [("/bin/true", "/bin/true is not Nsight Compute"), ("old", "is Nsight Compute 2025.1.1, older than 2026.2.1")],
)
def test_an_ncu_path_that_is_no_current_nsight_compute_is_named_not_passed_over(tmp_path, ncu_path, said):
    options = {"ncu_path_version": "2025.1.1"} if ncu_path == "old" else {"env": {"NCU_PATH": ncu_path}}
    results, machine = run_by_hand(tmp_path, **options)
    ename, message = results["s1-ncu-code"]
    assert ename == "ValueError" and "NCU_PATH=" in message and said in message, message
    assert "or unset it" in message
    assert machine.apt_installs() == [], "a wrong NCU_PATH must be said, not passed over for apt-get"


def test_a_cupti_folder_setting_that_names_a_file_stops_with_the_setting(tmp_path):
    a_file = tmp_path / "cupti.txt"
    a_file.write_text("not a folder")
    results, machine = run_by_hand(tmp_path, env={"NSPY_TUTORIAL_CUPTI_DIR": str(a_file)})
    ename, message = results["setup-helpers"]
    assert ename == "ValueError" and f"NSPY_TUTORIAL_CUPTI_DIR={a_file}" in message and "is a file" in message
    assert a_file.read_text() == "not a folder"
    nothing_installed(machine)
