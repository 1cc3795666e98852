"""Section 1's helpers: the settings, the fallbacks (offline wheelhouse, CUPTI, the Nsight Compute probe) and the
facts section 1 records. Nothing here imports torch or nsight, or touches CUDA. Section 1's visible cells call these
for what a learner would not type; every decision comes back with its reason, for the cell to print.
"""

import ctypes
import importlib
import importlib.metadata
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plumbing.harness import OUT_DIR

TIME_LIMITS_S = {"apt": 1200, "pip": 1200, "probe": 600, "cupti_child": 900}  # then a step is given up, said
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"  # the version a wheelhouse must be made for


def command_output(command, timeout=120):
    """What a command (a list) printed, without surrounding blanks; '' if it is missing, fails or times out."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def run_logged(command, log_path, time_limit_s, env=None):
    """Run a command with its output appended to log_path: its exit status, or None if it ran out of time.
    Its own process group, so that a time-out also ends the helpers it started (apt-get does)."""
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(map(str, command))}\n")
        log.flush()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            return process.wait(timeout=time_limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return None


def log_tail(log_path, lines=5):
    return "\n".join(Path(log_path).read_text(errors="replace").strip().splitlines()[-lines:])


def read_profiler_choice(environ=os.environ):
    """NSPY_TUTORIAL_PROFILER: auto (default: Nsight Compute when it works, else CUPTI), ncu or cupti."""
    choice = environ.get("NSPY_TUTORIAL_PROFILER", "auto").strip().lower() or "auto"
    if choice not in ("auto", "ncu", "cupti"):
        raise ValueError(f"NSPY_TUTORIAL_PROFILER={choice!r} is not auto, ncu or cupti: set one of those, or unset it.")
    return choice


def read_wheelhouse(environ=os.environ):
    """NSPY_TUTORIAL_WHEELHOUSE as a folder of wheels (installs offline, no apt), or None (PyPI and apt)."""
    given = environ.get("NSPY_TUTORIAL_WHEELHOUSE")
    folder = Path(given).expanduser().resolve() if given else None  # ~ and relative folders, as for every setting
    if folder and not any(folder.glob("*.whl")):
        problem = "holds no wheels (*.whl)" if folder.is_dir() else "is not a folder"
        raise FileNotFoundError(f"NSPY_TUTORIAL_WHEELHOUSE={given} ({folder}) {problem}. Make one with "
                                "scripts/make_wheelhouse.py, or unset it to install from PyPI.")  # fmt: skip
    return folder


def read_ncu_path(environ=os.environ):
    """NCU_PATH as the ncu executable (the file, or the folder that holds it), or None when unset. A path that
    names no runnable file is an error: a setting the user made is never passed over in silence."""
    given = environ.get("NCU_PATH")
    path = Path(given).expanduser() if given else None
    path = path / "ncu" if path and path.is_dir() else path
    if path and not (path.is_file() and os.access(path, os.X_OK)):
        problem = f"{path} is not executable" if path.is_file() else f"there is no file {path}"
        raise FileNotFoundError(f"NCU_PATH={given}: {problem}. {NCU_PATH_FIX}")
    return path


def can_make_folder(path):
    """Whether a folder can be made at `path` (tried in its nearest existing parent: /proc refuses even root)."""
    try:
        os.rmdir(tempfile.mkdtemp(dir=next(folder for folder in Path(path).parents if folder.exists())))
        return True
    except OSError:
        return False


INSTALL_ROOT = Path.home() / ".cache" / "nspy_tutorial"
PACKAGES_DIR = INSTALL_ROOT / "packages"


def read_cupti_dir(environ=os.environ):
    """NSPY_TUTORIAL_CUPTI_DIR: the folder the CUPTI backend's packages go into (made if missing)."""
    given = environ.get("NSPY_TUTORIAL_CUPTI_DIR")
    path = Path(given).expanduser().resolve() if given else INSTALL_ROOT / "cupti13"
    if given and (path.is_file() or not (path.is_dir() or can_make_folder(path))):
        problem = "is a file, not a folder" if path.is_file() else "cannot be made"
        raise ValueError(f"NSPY_TUTORIAL_CUPTI_DIR={given}: {path} {problem}. It names the folder for the CUPTI "
                         "backend's packages: set a folder you can write to, or unset it for the default.")  # fmt: skip
    return path


NCU_MIN_VERSION = (2026, 2, 1)  # nsight-python 1.1.0 refuses anything older
NCU_FLOOR = ".".join(map(str, NCU_MIN_VERSION))
NCU_PATH_FIX = f"Set NCU_PATH to the ncu of Nsight Compute {NCU_FLOOR} or newer (or its folder), or unset it."
APT_FAILURE = {"why": ""}  # why the last apt-get install did not give an ncu, for the reason section 1 prints


def parse_ncu_version(text):
    """(year, minor, patch) from `ncu --version` output, or None if there is no version line."""
    match = re.search(r"Version\s+(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(part) for part in match.groups()) if match else None


def version_text(version):
    return ".".join(map(str, version)) if version else "none"


def ncu_version_of(path):
    return parse_ncu_version(command_output([str(path), "--version"], timeout=60)) if path else None


def ncu_is_recent(version):
    return version is not None and tuple(version)[:3] >= NCU_MIN_VERSION


def ncus_on_path(path_variable):
    """Every `ncu` on PATH, in PATH order: shutil.which alone only shows the first."""
    found = [shutil.which("ncu", path=folder) for folder in (path_variable or "").split(os.pathsep) if folder]
    return [Path(path) for path in dict.fromkeys(found) if path]


def package_ncu(package_files):
    """The package's own `ncu` among the files `dpkg -L` lists (it also ships per-platform copies further down)."""
    launchers = [Path(line) for line in package_files if line.endswith("/ncu")]
    return min(launchers, key=lambda path: len(path.parts)) if launchers else None


def ncu_install_needed(package, choice, wheelhouse, environ=os.environ):
    """apt-get only for Nsight Compute, online, when neither NCU_PATH, nor the package, nor PATH has a current ncu."""
    if choice == "cupti" or wheelhouse or read_ncu_path(environ):
        return False
    return choose_ncu(command_output(["dpkg", "-L", package]).split(), "auto", None, environ)[0] is None


def apt_get_install(package, log_path):
    """apt-get update and install `package` (output in log_path); a failure is said, and leaves CUPTI to measure."""
    print(f"installing {package} with apt-get (a few minutes) ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}  # apt must never stop to ask a question
    steps = [["update", "-qq"], ["install", "-y", "-qq", package]] if shutil.which("apt-get") else []
    APT_FAILURE["why"] = "" if steps else "apt-get is missing here"
    for step in steps:
        status = run_logged(["apt-get", *step], log_path, TIME_LIMITS_S["apt"], env)
        if status != 0:
            ended = f"exit {status}" if status is not None else f"no end within {TIME_LIMITS_S['apt']} s"
            APT_FAILURE["why"] = f"apt-get {step[0]} failed ({ended}; NVIDIA's apt repository unreachable?)"
            break
    if APT_FAILURE["why"]:
        print(f"{APT_FAILURE['why']}; see {log_path}. Set NCU_PATH to an ncu {NCU_FLOOR}+, or go on with CUPTI")


def choose_ncu(package_files, choice, wheelhouse, environ=os.environ):
    """(ncu, what it is): NCU_PATH when set (it must be current), else the package's ncu, else a current one on
    PATH; (None, why not) when there is none, an error if NSPY_TUTORIAL_PROFILER=ncu."""
    given = read_ncu_path(environ)
    if choice == "cupti":
        return None, "NSPY_TUTORIAL_PROFILER=cupti"
    if given and not ncu_is_recent(ncu_version_of(given)):
        found = f"Nsight Compute {version_text(v)}" if (v := ncu_version_of(given)) else "not Nsight Compute"
        raise ValueError(f"NCU_PATH={environ['NCU_PATH']}: {given} is {found}, not {NCU_FLOOR}+. {NCU_PATH_FIX}")
    found = [given] if given else [path for path in [package_ncu(package_files)] if path]
    versions = {path: ncu_version_of(path) for path in found + ncus_on_path(environ.get("PATH"))}
    for path, version in versions.items():
        if ncu_is_recent(version):
            return path, f"Nsight Compute {version_text(version)}" + (" from NCU_PATH" if given else "")
    seen = ", ".join(f"{version_text(version)} at {path}" for path, version in versions.items()) or "none"
    why = f"there is no ncu {NCU_FLOOR}+ (found: {seen})" + (f"; {APT_FAILURE['why']}" if APT_FAILURE["why"] else "")
    why += "; offline (NSPY_TUTORIAL_WHEELHOUSE), so apt-get was not tried" if wheelhouse else ""
    if choice == "ncu":
        raise RuntimeError(f"NSPY_TUTORIAL_PROFILER=ncu, but {why}. Set NCU_PATH, or NSPY_TUTORIAL_PROFILER=auto")
    return None, why


# requirements.txt's text: the pins, installed without dependencies (the setup-helpers cell embeds the file).
REQUIREMENTS = (Path(__file__).resolve().parent.parent / "requirements.txt").read_text()
CUPTI_MARKER = "# [cupti]"  # the line of requirements.txt after which the CUPTI backend's set is listed


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_from_requirements(text):
    """({name: version} of the notebook's pins, the same for the CUPTI set after CUPTI_MARKER)."""
    lines = text.splitlines()
    cut = next(index for index, line in enumerate(lines) if line.startswith(CUPTI_MARKER))
    pairs = [[line.split("#", 1)[0].strip().partition("==") for line in part] for part in (lines[:cut], lines[cut:])]
    return tuple({name.strip(): version.strip() for name, _, version in part if name} for part in pairs)


PINS, CUPTI_PINS = pins_from_requirements(REQUIREMENTS)


def versions_in(folders):
    """{normalized name: version} of the distributions in these folders; the first one found wins, as for imports."""
    found = list(importlib.metadata.distributions(path=[str(folder) for folder in folders]))
    return {normalize(dist.metadata["Name"] or ""): dist.version for dist in reversed(found)}


def versions_outside_tutorial():
    """What this Python has without the tutorial's own folders: Colab's packages, as Colab installed them."""
    own = {str(PACKAGES_DIR), str(CUPTI_PACKAGES_DIR)}
    return versions_in([entry for entry in sys.path if entry not in own])


def install_pins(pins, folder, wheelhouse, log_path):
    """pip install, without dependencies, into folder the pins this Python lacks (or has at another version) and
    folder does not hold yet; with a wheelhouse, offline. Colab's site-packages are never written."""
    have, in_folder = versions_outside_tutorial(), versions_in([folder])
    missing = [f"{n}=={v}" for n, v in pins.items() if v not in (have.get(normalize(n)), in_folder.get(normalize(n)))]
    offline = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    command = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *offline, "--no-deps",
               "--upgrade", "--target", str(folder), *missing]  # fmt: skip
    print(f"installing {' '.join(missing)} into {folder}" if missing else f"{folder} holds the pins already")
    status = run_logged(command, log_path, TIME_LIMITS_S["pip"]) if missing else 0
    if status != 0:
        fix = "Check the network, or set NSPY_TUTORIAL_WHEELHOUSE to a wheelhouse (scripts/make_wheelhouse.py)."
        if wheelhouse:
            fix = f"NSPY_TUTORIAL_WHEELHOUSE={wheelhouse} lacks a wheel: make_wheelhouse.py --python-version {PYTHON}"
        ended = f"exit {status}" if status is not None else f"no answer within {TIME_LIMITS_S['pip']} s"
        raise RuntimeError(f"pip could not install {' '.join(missing)} ({ended}):\n{log_tail(log_path, 8)}\n{fix}")
    return missing


def cupti_pins(have):
    """The CUPTI set; cuda-bindings only where this Python's own is older than 13 (cupti-python 13.4 needs 13)."""
    major = (have.get("cuda-bindings") or "0").split(".")[0]
    return {n: v for n, v in CUPTI_PINS.items() if n != "cuda-bindings" or not (major.isdigit() and int(major) >= 13)}


def put_first_on_sys_path(folder):
    """Import from folder before site-packages, in this process and in the child processes it starts."""
    folder = str(folder)
    sys.path[:] = [folder, *(entry for entry in sys.path if entry != folder)]
    others = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and entry != folder]
    os.environ["PYTHONPATH"] = os.pathsep.join([folder, *others])
    importlib.invalidate_caches()


PROBE_SCRIPT = (Path(__file__).resolve().parent / "ncu_probe.py").read_text()  # the setup-helpers cell embeds it
PROBE_REMEDIES = {
    "ERR_NVGPUCTRPERM": "this user may not read the GPU's counters: run as root, or allow them for all users "
    "(NVreg_RestrictProfilingToAdminUsers=0)",
    "or later is required": f"nsight found an ncu that is too old: put Nsight Compute {NCU_FLOOR}+ first on PATH",
    "NV_INJ_ERROR": "Nsight Compute could not attach to the process: its version may not support this driver",
}


def probe_ncu(ncu_path, prefix, log_path, script=None):
    """Profile one tiny kernel with Nsight Compute in a child process: (usable, why not). Once loaded, Nsight
    Compute stays in a process, so the notebook's own process commits to it only after this worked. The child
    writes what it found to probe.json in `prefix`."""
    env = {key: value for key, value in os.environ.items() if key != "NSPY_NCU_INIT_AT_IMPORT"} | {"MPLBACKEND": "Agg"}
    answer = Path(prefix, "probe.json")
    answer.unlink(missing_ok=True)  # an earlier Run all's answer must never stand in for this one
    status = run_logged([sys.executable, "-c", script or PROBE_SCRIPT, prefix], log_path, TIME_LIMITS_S["probe"], env)
    report = json.loads(answer.read_text()) if answer.is_file() else {"stage": "start", "error": f"exit {status}"}
    if status is None:
        return False, f"the Nsight Compute probe did not finish within {TIME_LIMITS_S['probe']} s; see {log_path}"
    if report["stage"] != "done":
        error = report["error"] or "no error text"
        cause = [line.strip() for line in error.splitlines() if "==ERROR==" in line] or error.splitlines()[:2]
        remedy = next((text for key, text in PROBE_REMEDIES.items() if key in error), f"see {log_path}")
        return False, f"the probe failed at '{report['stage']}': {' '.join(cause)[:400]}. What to do: {remedy}"
    if not (report["ncu"] and os.path.samefile(report["ncu"], ncu_path)):
        return False, f"the probe's nsight used ncu at {report['ncu']}, not the chosen {ncu_path}"
    return True, ""


def choose_backend(ncu, why_no_ncu, choice, environ=os.environ):
    """(USE_NCU, why CUPTI): Nsight Compute when the probe profiled with it, else CUPTI (an error when
    NSPY_TUTORIAL_PROFILER=ncu). It sets NSPY_NCU_INIT_AT_IMPORT for the `import nsight` that follows."""
    usable, why = probe_ncu(ncu, f"{OUT_DIR / 's1_probe'}/", OUT_DIR / "ncu_probe.log") if ncu else (False, why_no_ncu)
    if choice == "ncu" and not usable:
        raise RuntimeError(f"NSPY_TUTORIAL_PROFILER=ncu, but Nsight Compute is not usable: {why}")
    environ.pop("NSPY_NCU_INIT_AT_IMPORT", None)  # a leftover "0" would keep Nsight Compute out
    if not usable:
        environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"  # on CUPTI, keep Nsight Compute out of this process
    print("backend: Nsight Compute" if usable else f"backend: CUPTI, because {why}")
    return usable, why


def find_libcupti(cupti_dir):
    """The libcupti.so.13 that the CUPTI install put under cupti_dir."""
    for path in sorted(Path(cupti_dir).glob("nvidia/*/lib/libcupti.so.13*")):
        return path
    raise FileNotFoundError(f"libcupti.so.13 is not under {cupti_dir}/nvidia/*/lib: run section 1's pip cell again.")


def preload_libcupti(cupti_dir):
    """Load libcupti.so.13 from the CUPTI folder before cupti, nsight or torch can load another one: cuda.pathfinder
    searches only site-packages (it would pick torch's older one), and reuses a library already loaded."""
    put_first_on_sys_path(cupti_dir)  # cupti-python itself comes from there too
    ctypes.CDLL(str(path := find_libcupti(cupti_dir)), mode=os.RTLD_GLOBAL)
    return path


def check_backend(nsight, use_ncu, libcupti, environ=os.environ):
    """After `import nsight`: Nsight Compute loaded, as the probe said; or CUPTI resolved the preloaded libcupti
    (nsight.activate writes the file it resolved into NVTX_INJECTION64_PATH)."""
    resolved = environ.get("NVTX_INJECTION64_PATH", "")
    if use_ncu and nsight.get_active_tool() != nsight.Tool.NCU:
        error = nsight.collection.ncu.injection_load_error
        raise RuntimeError(f"nsight did not load Nsight Compute ({error}), though the probe could: restart the "
                           "runtime and Run all, or set NSPY_TUTORIAL_PROFILER=cupti")  # fmt: skip
    if not use_ncu and not (resolved and Path(resolved).exists() and os.path.samefile(resolved, libcupti)):
        raise RuntimeError(f"CUPTI resolved {resolved or 'no library'}, not the preloaded {libcupti}: restart the "
                           "runtime and Run all, running no other cell first")  # fmt: skip


def environment_facts(torch, nsight, use_ncu, cupti_reason, libcupti):
    """What summary.json and the recordings say about this machine (torch and nsight passed in, imported in order)."""
    props, ncu = torch.cuda.get_device_properties(0), shutil.which("ncu")
    driver = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).split("\n")[0]
    return {
        "gpu": props.name, "driver": driver or "?", "compute_capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count, "l2_bytes": props.L2_cache_size,
        "memory_gib": round(props.total_memory / 2**30, 1), "ncu_path": ncu,
        "ncu_version": version_text(ncu_version_of(ncu)),
        "nsight_python": nsight.__version__, "active_tool": str(nsight.get_active_tool()),
        "profiler": "ncu" if use_ncu else "cupti", "cupti_reason": cupti_reason, "libcupti": str(libcupti or ""),
        "packages_dir": str(PACKAGES_DIR), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "python": sys.version.split()[0],
    }  # fmt: skip


CHILD_IMPORTS = "import ctypes\nimport json\nimport os\nimport sys\nimport time\nfrom pathlib import Path\n\n"


def cupti_child(benchmark_file, function_name, sizes, prefix):
    """Section 9's child program: run_cupti_child runs this function's own source in a fresh Python. It profiles
    one benchmark (its source in benchmark_file) under nsight's CUPTI backend, one size per call, and writes the
    rows, the wall time, the tool and the libcupti CUPTI bound to into child_result.json under prefix."""
    ctypes.CDLL(os.environ["NSPY_TUTORIAL_LIBCUPTI"], mode=os.RTLD_GLOBAL)  # first: CUPTI binds to this copy
    import nsight

    nsight.activate(nsight.Tool.CUPTI)
    import pandas as pd
    import torch

    namespace = {"nsight": nsight, "torch": torch, "pd": pd}
    exec(compile(Path(benchmark_file).read_text(), benchmark_file, "exec"), namespace)
    # Section 5's five runs, no thermal pauses, and the kernels of one call added up (cuBLAS may launch two).
    options = {"runs": 5, "thermal_mode": "off", "combine_kernel_metrics": lambda first, second: first + second}
    timed = nsight.analyze.kernel(**options, output_prefix=prefix, verbosity=nsight.VerbosityLevel.SILENT)
    clock = time.perf_counter()
    stacked = pd.concat([timed(namespace[function_name])(n).to_dataframe() for n in json.loads(sizes)])
    rows = stacked[["Annotation", "n", "AvgValue", "RelativeStdDevPct", "Kernel"]].to_dict("records")
    # NVTX_INJECTION64_PATH: the libcupti nsight.activate handed to NVTX, which the parent checks against its preload
    result = {"rows": rows, "wall_s": time.perf_counter() - clock, "tool": str(nsight.get_active_tool()),
              "libcupti": os.environ.get("NVTX_INJECTION64_PATH", "")}  # fmt: skip
    nsight.deactivate()
    Path(prefix, "child_result.json").write_text(json.dumps(result))


def run_cupti_child(benchmark, sizes, folder, python=sys.executable):
    """Profile `benchmark` under CUPTI in a fresh Python (cupti_child's source, written to `folder` beside the
    benchmark's own source); its result. The child inherits none of the variables Nsight Compute set here."""
    folder, libcupti = Path(folder), find_libcupti(CUPTI_PACKAGES_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    program = f"{CHILD_IMPORTS}{inspect.getsource(cupti_child)}\n\ncupti_child(*sys.argv[1:])\n"
    (folder / "cupti_child.py").write_text(program)
    (folder / "benchmark.py").write_text(inspect.getsource(benchmark))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NV_COMPUTE_PROFILER"))}
    env |= {"PYTHONPATH": os.pathsep.join(filter(None, [str(CUPTI_PACKAGES_DIR), env.get("PYTHONPATH")])),
            "NSPY_NCU_INIT_AT_IMPORT": "0", "NSPY_TUTORIAL_LIBCUPTI": str(libcupti), "MPLBACKEND": "Agg"}  # fmt: skip
    command = [python, folder / "cupti_child.py", folder / "benchmark.py", benchmark.__name__, json.dumps(sizes)]
    status = run_logged([*command, f"{folder}/"], folder / "child.log", TIME_LIMITS_S["cupti_child"], env)
    if status != 0:
        ended = f"exit {status}" if status is not None else f"no end within {TIME_LIMITS_S['cupti_child']} s"
        raise RuntimeError(f"the CUPTI child failed ({ended}): {log_tail(folder / 'child.log', 6)}")
    result = json.loads((folder / "child_result.json").read_text())
    if os.path.realpath(result["libcupti"]) != os.path.realpath(libcupti):
        raise RuntimeError(f"CUPTI bound to {result['libcupti']!r}, not the preloaded {libcupti}")
    return result


CUPTI_PACKAGES_DIR = read_cupti_dir()

if __name__ == "__main__":  # the notebook's cell: section 1's settings are read (a bad one stops here)
    PROFILER_CHOICE, WHEELHOUSE = read_profiler_choice(), read_wheelhouse()
    read_ncu_path()  # a setting the user made is checked even where it is not used
    print(f"profiler: {PROFILER_CHOICE}; installs from: {WHEELHOUSE or 'PyPI and apt'}")
