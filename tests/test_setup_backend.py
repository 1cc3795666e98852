"""Section 1's backend: Nsight Compute only if the probe profiled a real time with the chosen ncu; else CUPTI, once
the probe profiled with it too. Each failure of the probe is told apart by what ncu printed; its time limit is ample."""

import builtins
import json
import math
import os
import re
import sys
from types import SimpleNamespace

import nsight
import pytest
from evidence import VERIFIED
from fakes import FakeMachine, build_fake_injection_library
from support import free_names

from plumbing import setup_helpers as helpers
from plumbing.setup_helpers import check_kernel_times


@pytest.mark.parametrize("times", [[0.0], [math.nan], [], [math.inf], [-3.0], [812.0, 0.0]])
def test_a_probe_kernel_time_of_zero_nan_or_none_is_refused(times):
    with pytest.raises(RuntimeError, match="the check kernel measured"):
        check_kernel_times(times)
    check_kernel_times([812.0])  # a real time passes


def test_the_real_probe_without_nsight_computes_injection_stops_at_import_nsight(tmp_path, monkeypatch):
    machine = FakeMachine(tmp_path / "machine", path_ncus=["2026.3.1"])
    monkeypatch.setenv("PATH", machine.build()["PATH"])
    ncu = machine.root / "path-ncu-2026.3.1" / "ncu"
    kind, why = helpers.probe_ncu(ncu, f"{tmp_path}/probe/", tmp_path / "probe.log")
    assert kind == "failed" and why.startswith("the probe failed at 'import nsight'") and "probe.log" in why, why
    assert json.loads((tmp_path / "probe/probe.json").read_text())["ncu"] == str(ncu), "probe.json names its ncu"
    assert [path.name for path in (tmp_path / "probe").iterdir()] == ["probe.json"], "nothing was profiled"


def answering(ncu, stage, error) -> str:
    report = json.dumps({"ncu": ncu, "stage": stage, "error": error})
    return f"import pathlib, sys\nprint('a warning')\npathlib.Path(sys.argv[1], 'probe.json').write_text({report!r})"


PERMISSION = "ProfilerException: PROFILING FAILED \nErrors:\n- ==ERROR== ERR_NVGPUCTRPERM - The user does not have"
DRIVER = "ProfilerException: ==ERROR== Cuda driver is not compatible with Nsight Compute."
PROBES = {  # probe program -> what probe_ncu must answer (kind, what its reason must say)
    "done with the chosen ncu": (answering("CHOSEN", "done", ""), "ok", []),
    "done with another ncu": (answering("OTHER", "done", ""), "failed", ["OTHER", "CHOSEN"]),
    "measured zero": (answering("CHOSEN", "profile one kernel", "measured [0.0]"), "failed", ["'profile one kernel'"]),
    "driver mismatch": (answering(None, "profile one kernel", DRIVER), "driver", ["does not support the GPU's driver"]),
    "no counter permission": (
        answering(None, "profile one kernel", PERMISSION),
        "counters",
        ["ERR_NVGPUCTRPERM", "cannot be changed from the notebook", "an administrator can"],
    ),
    "no injection": (answering(None, "import nsight", "NV_INJ_ERROR"), "injection", ["injection library"]),
    "died, an earlier answer left": ("import os\nos._exit(7)", "failed", ["exit 7", "LOG"]),
    "hung": ("import time\ntime.sleep(60)", "hang", ["did not end within 1 s", "LOG"]),
}


@pytest.mark.parametrize("case", PROBES)
def test_the_probes_answer_is_told_apart_by_what_ncu_said_and_names_its_cause(tmp_path, monkeypatch, case):
    script, kind, said = PROBES[case]
    chosen, other = tmp_path / "chosen", tmp_path / "other"
    names = {"CHOSEN": str(chosen), "OTHER": str(other), "LOG": str(tmp_path / "probe.log")}
    for name, path in names.items():
        script, said = script.replace(name, path), [text.replace(name, path) for text in said]
    chosen.write_text("")
    other.write_text("")
    (tmp_path / "p").mkdir()
    (tmp_path / "p/probe.json").write_text(json.dumps({"ncu": str(chosen), "stage": "done", "error": ""}))  # stale
    monkeypatch.setitem(helpers.TIME_LIMITS_S, "probe", 1)
    monkeypatch.setattr(helpers, "probe_program", lambda: script)
    answer, why = helpers.probe_ncu(chosen, f"{tmp_path}/p/", tmp_path / "probe.log")
    assert answer == kind and all(text in why for text in said), f"{case}: {answer}, {why}"


@pytest.fixture
def decided(monkeypatch):
    """decide_ncu's answer, as the test sets it; the backend's own state put back after."""
    monkeypatch.setattr(helpers, "BACKEND", {})
    answer = {"use_ncu": False, "reason": "no ncu here"}
    monkeypatch.setattr(helpers, "decide_ncu", lambda environ: (answer["use_ncu"], answer["reason"]))
    return answer


def test_nsight_compute_clears_a_leftover_init_at_import_and_installs_nothing(tmp_path, monkeypatch, decided):
    installed = []
    monkeypatch.setattr(helpers, "install_pins", lambda pins, folder, *args: installed.append(folder))
    environ = {"NSPY_NCU_INIT_AT_IMPORT": "0", "NSPY_TUTORIAL_CUPTI_DIR": str(tmp_path / "cupti")}
    decided.update(use_ncu=True, reason="")
    helpers.choose_backend(environ)
    assert "NSPY_NCU_INIT_AT_IMPORT" not in environ, "a leftover NSPY_NCU_INIT_AT_IMPORT=0 keeps Nsight Compute out"
    assert helpers.BACKEND["use_ncu"] and not installed, "under Nsight Compute no CUPTI set is installed"


def test_cupti_is_not_used_until_the_probe_has_profiled_with_it(tmp_path, monkeypatch, decided):
    monkeypatch.setattr(helpers, "install_pins", lambda *args: [])  # the CUPTI set is there
    monkeypatch.setattr(helpers, "preload_libcupti", lambda folder: folder / "libcupti.so.13")
    failed, environ = ["measured [0.0]"], {"NSPY_TUTORIAL_CUPTI_DIR": str(tmp_path / "cupti")}
    monkeypatch.setattr(helpers, "probe_cupti", lambda prefix, log_path: failed[0])
    with pytest.raises(RuntimeError, match="kernel here. Nsight Compute: no ncu here. CUPTI: measured"):
        helpers.choose_backend(environ)
    assert "NSPY_NCU_INIT_AT_IMPORT" not in environ, "CUPTI failed its probe: nothing may be set for it"
    failed[0] = ""
    helpers.choose_backend(environ)
    assert helpers.BACKEND["libcupti"] == tmp_path / "cupti/libcupti.so.13", "the CUPTI folder the setting names"
    assert (tmp_path / "cupti/.nspy_tutorial_out").is_file(), "read where it is used: made and marked there"
    assert environ["NSPY_NCU_INIT_AT_IMPORT"] == "0", "on CUPTI, Nsight Compute must stay out of the process"


@pytest.fixture
def cupti_set(tmp_path, monkeypatch):
    """The CUPTI set's folder, holding a libcupti.so.13 (a file, unless a test builds a library there)."""
    monkeypatch.setattr(helpers, "CUPTI_PACKAGES_DIR", tmp_path / "cupti")
    libcupti = tmp_path / "cupti/nvidia/cu13/lib/libcupti.so.13"
    libcupti.parent.mkdir(parents=True)
    libcupti.touch()
    return libcupti


# A probe that profiled under CUPTI: its report names the libcupti FAKE_LIBCUPTI says (else the one it was given).
PROFILED_UNDER_CUPTI = """import json, os, pathlib, sys
bound = os.environ.get("FAKE_LIBCUPTI", os.environ["NSPY_TUTORIAL_LIBCUPTI"])
report = {"stage": "done", "error": "", "libcupti": bound, "env": dict(os.environ)}
pathlib.Path(sys.argv[1], "probe.json").write_text(json.dumps(report))
"""


def test_the_cupti_probe_puts_the_cupti_set_first_leaves_nsight_compute_out_and_checks_its_libcupti(
    tmp_path, monkeypatch, cupti_set
):
    monkeypatch.setattr(helpers, "probe_program", lambda: PROFILED_UNDER_CUPTI)
    monkeypatch.setenv("PYTHONPATH", "/packages")
    for left_by_ncu in ("NVTX_INJECTION64_PATH", "NV_COMPUTE_PROFILER_DISABLE_STOCK_FILE_DEPLOYMENT"):
        monkeypatch.setenv(left_by_ncu, "/ncu/lib")
    (resolved := tmp_path / "resolved.so").symlink_to(cupti_set)  # nsight may name the preloaded file by another path
    monkeypatch.setenv("FAKE_LIBCUPTI", str(resolved))
    parent_env, prefix = dict(os.environ), tmp_path / "s1_cupti"
    prefix.mkdir()
    assert helpers.probe_cupti(f"{prefix}/", tmp_path / "probe.log") == "", "the probe profiled with the preloaded copy"
    assert os.environ == parent_env, "the parent's own environment must stay as it was"
    env = json.loads((prefix / "probe.json").read_text())["env"]
    assert not [k for k in env if k.startswith(("NVTX_INJECTION", "NV_COMPUTE_PROFILER"))], "Nsight Compute's leftovers"
    wanted = {
        "PYTHONPATH": f"{tmp_path / 'cupti'}{os.pathsep}/packages",
        "NSPY_NCU_INIT_AT_IMPORT": "0",
        "NSPY_TUTORIAL_LIBCUPTI": str(cupti_set),
    }
    assert wanted.items() <= env.items(), "CUPTI's packages first, its libcupti, no Nsight Compute"
    monkeypatch.setenv("FAKE_LIBCUPTI", "/torch/lib/libcupti.so.12")
    said = helpers.probe_cupti(f"{prefix}/", tmp_path / "probe.log")
    assert re.match(r"CUPTI bound to '/torch/lib/libcupti.so.12', not the preloaded .*so\.13$", said), said


def test_the_real_probe_under_cupti_on_a_machine_without_cupti_python_stops_at_import_nsight(tmp_path, cupti_set):
    """The real probe loads libcupti first (an empty file is no library), then fails to activate CUPTI (no
    cupti-python here)."""
    said = helpers.probe_cupti(f"{tmp_path}/probe/", tmp_path / "probe.log")
    assert said.startswith("the probe failed at 'import nsight': OSError") and "libcupti.so.13" in said, said
    built = build_fake_injection_library(tmp_path / "built")
    if built is None:
        pytest.skip("no C compiler here to build a loadable libcupti.so.13 (.ci/run's image has one)")
    cupti_set.write_bytes(built.read_bytes())
    said = helpers.probe_cupti(f"{tmp_path}/probe/", tmp_path / "probe.log")
    assert said.startswith("the probe failed at 'import nsight'") and "cupti-python is required" in said, said


def test_the_probe_program_imports_every_module_its_functions_use():
    """A name it lacks would fail only on a GPU, past what a CPU reaches, for Nsight Compute and CUPTI alike."""
    lacking = free_names(helpers.probe_program()) - set(dir(builtins))
    assert not lacking, f"probe_program must import {lacking}"


def test_the_sets_libcupti_is_loaded_and_its_folder_imported_from_first_here_and_in_child_processes(
    tmp_path, monkeypatch, cupti_set
):
    monkeypatch.setattr(sys, "path", ["/site"])
    monkeypatch.setenv("PYTHONPATH", "/site")
    with pytest.raises(FileNotFoundError, match="run section 1 again"):
        helpers.preload_libcupti(tmp_path)
    assert sys.path == ["/site"] and os.environ["PYTHONPATH"] == "/site", "a folder without libcupti changes nothing"
    if (built := build_fake_injection_library(tmp_path / "built")) is None:
        pytest.skip("no C compiler here to build a loadable libcupti.so.13 (.ci/run's image has one)")
    cupti_set.write_bytes(built.read_bytes())
    assert helpers.preload_libcupti(helpers.CUPTI_PACKAGES_DIR) == cupti_set
    folder = str(helpers.CUPTI_PACKAGES_DIR)
    assert sys.path == [folder, "/site"] and os.environ["PYTHONPATH"] == f"{folder}{os.pathsep}/site"


def test_libcupti_is_the_preloaded_one_or_the_check_stops_the_run(tmp_path, monkeypatch):
    preloaded, other, alias = tmp_path / "libcupti.so.13", tmp_path / "libcupti.so.12", tmp_path / "alias.so"
    preloaded.write_text("13")
    other.write_text("12")
    alias.symlink_to(preloaded)
    monkeypatch.setattr(helpers, "BACKEND", {"use_ncu": False, "libcupti": preloaded})
    pinned = SimpleNamespace(__version__=helpers.PINS["nsight-python"])  # as the pip cell installed it
    helpers.check_backend(pinned, False, {"NVTX_INJECTION64_PATH": str(alias)})
    for resolved in (str(other), ""):
        with pytest.raises(RuntimeError, match="not the preloaded"):
            helpers.check_backend(pinned, False, {"NVTX_INJECTION64_PATH": resolved})
    with pytest.raises(RuntimeError, match="nsight-python 1.0.0, not 1.1.0, was imported: see the pip cell"):
        helpers.check_backend(SimpleNamespace(__version__="1.0.0"), False, {})
    with pytest.raises(RuntimeError, match="NSPY_TUTORIAL_PROFILER=cupti"):  # the real nsight; the cell chose ncu
        helpers.BACKEND["use_ncu"] = True
        helpers.check_backend(nsight, False, {})


def test_the_environment_names_the_gpu_the_ncu_on_path_and_the_backend(tmp_path, monkeypatch):
    """What summary.json and the recordings say about the machine: torch stands in (no GPU here), nsight is real."""
    props = SimpleNamespace(
        name="Tesla T4", major=7, minor=5, multi_processor_count=40, L2_cache_size=4 << 20, total_memory=15 * 2**30
    )
    torch = SimpleNamespace(
        cuda=SimpleNamespace(get_device_properties=lambda index: props),
        __version__="2.11.0",
        version=SimpleNamespace(cuda="13.0"),
        backends=SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False))),
    )
    monkeypatch.setenv("PATH", FakeMachine(tmp_path / "m", path_ncus=["2026.3.1"]).build()["PATH"])
    monkeypatch.setattr(helpers, "BACKEND", {"cupti_reason": "no ncu here", "libcupti": tmp_path / "libcupti.so.13"})
    facts = helpers.environment_facts(torch, nsight)  # the real nsight: Nsight Compute not loaded, so CUPTI
    expected = {
        "gpu": "Tesla T4",
        "driver": "580.82.07",
        "compute_capability": "7.5",
        "sms": 40,
        "l2_bytes": 4 << 20,
        "memory_gib": 15.0,
        "ncu_path": str(tmp_path / "m/path-ncu-2026.3.1/ncu"),
        "ncu_version": "2026.3.1",
        "nsight_python": nsight.__version__,
        "profiler": "cupti",
        "cupti_reason": "no ncu here",
        "libcupti": str(tmp_path / "libcupti.so.13"),
        "torch": "2.11.0",
        "torch_cuda": "13.0",
        "tf32_matmul": False,
    }
    assert {key: facts.get(key) for key in expected} == expected


def test_the_probe_waits_ten_times_the_slowest_profiled_call_the_runner_recorded():
    """A probe is one profiled call of a tiny kernel: a cold machine may be far slower than the runner was."""
    logs = [path.read_text() for path in VERIFIED.glob("*/ncu_launch.log")]
    seconds = [float(s) for log in logs for s in re.findall(r"ncu exit \d+ in ([\d.]+) s", log)]
    if not seconds:
        pytest.skip("no committed ncu_launch.log (a launch-mode run) times an ncu call")
    limit = helpers.TIME_LIMITS_S["probe"]
    assert limit >= 10 * max(seconds), f"the probe's {limit} s is short of ten times {max(seconds)} s"
