"""Section 1's helpers: what a learner's copy of section 1 would not type. The settings of headless runs, the
Nsight Compute versions to try and the probe that decides between them (choose_backend), the CUPTI fallback and the
facts the summary records. Nothing here imports torch or nsight, or touches CUDA.
"""

import ctypes
import importlib
import importlib.metadata
import inspect
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from plumbing.folders import setting_folder
from plumbing.harness import ENVIRONMENT, OUT_DIR

# Seconds before a step is given up, said by name. An update reads indexes; a probe attaches to one tiny kernel.
TIME_LIMITS_S = {"apt-get update": 300, "apt-get install": 1800, "probe": 300, "pip": 1200}
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


def log_tail(log_path, lines=6):
    return "\n".join(Path(log_path).read_text(errors="replace").strip().splitlines()[-lines:])


def ended(status, step):
    return f"exit {status}" if status is not None else f"{step} did not end within {TIME_LIMITS_S[step]} s"


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
        fix = "Make one with scripts/make_wheelhouse.py, or unset it to install from PyPI."
        raise FileNotFoundError(f"NSPY_TUTORIAL_WHEELHOUSE={given} ({folder}) {problem}. {fix}")
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


def read_cupti_dir(environ=os.environ):
    """NSPY_TUTORIAL_CUPTI_DIR (default ~/.cache/nspy_tutorial/cupti13) by the folder rules (plumbing/folders.py):
    pip installs there with --upgrade, which deletes each same-named folder it replaces. Made and marked."""
    return setting_folder("NSPY_TUTORIAL_CUPTI_DIR", Path.home() / ".cache/nspy_tutorial/cupti13", environ)


REQUIREMENTS = (Path(__file__).resolve().parent.parent / "requirements.txt").read_text()  # the cell embeds it
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


def parse_ncu_version(text):
    """(year, minor, patch) from `ncu --version` output or a package name, or None if it holds no version."""
    match = re.search(r"(?:Version\s+|nsight-compute-)(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(part) for part in match.groups()) if match else None


def version_text(version):
    return ".".join(map(str, version)) if version else "none"


NCU_MIN_VERSION = (2026, 2, 1)  # nsight-python 1.1.0 refuses anything older
# ncu-report reads reports of its own year.minor and older: the newest Nsight Compute worth installing.
NCU_CEILING = tuple(int(part) for part in PINS["ncu-report"].split(".")[:2])
NCU_RANGE = f"{version_text(NCU_MIN_VERSION)} to {version_text(NCU_CEILING)}.x"
NCU_PATH_FIX = f"Set NCU_PATH to the ncu of Nsight Compute {NCU_RANGE} (or its folder), or unset it."


def ncu_accepted(version):
    """Whether nsight-python takes this Nsight Compute and the pinned ncu-report reads its reports."""
    return version is not None and NCU_MIN_VERSION <= tuple(version)[:3] and tuple(version)[:2] <= NCU_CEILING


def ncu_version_of(path):
    return parse_ncu_version(command_output([str(path), "--version"], timeout=60)) if path else None


def ncus_on_path(path_variable):
    """Every `ncu` on PATH, in PATH order: shutil.which alone only shows the first."""
    found = [shutil.which("ncu", path=folder) for folder in (path_variable or "").split(os.pathsep) if folder]
    return [Path(path) for path in dict.fromkeys(found) if path]


def package_ncu(package):
    """The package's own `ncu` among the files `dpkg -L` lists (it also ships per-platform copies further down)."""
    launchers = [Path(line) for line in command_output(["dpkg", "-L", package]).split() if line.endswith("/ncu")]
    return min(launchers, key=lambda path: len(path.parts)) if launchers else None


def newest_first(names):
    """The versioned Nsight Compute packages among names that nsight-python and ncu-report accept, newest first;
    never the unversioned `nsight-compute` (a virtual package in NVIDIA's repository, 2022.4.1 in Ubuntu's)."""
    versions = {name: parse_ncu_version(name) for name in names if re.fullmatch(r"nsight-compute-[\d.]+", name)}
    return sorted((name for name, version in versions.items() if ncu_accepted(version)), key=versions.get)[::-1]


def put_first_on_path(folder, environ, variable="PATH"):
    others = [entry for entry in environ.get(variable, "").split(os.pathsep) if entry and entry != str(folder)]
    environ[variable] = os.pathsep.join([str(folder), *others])


def accepted_ncu_path(environ=os.environ):
    """NCU_PATH's ncu if it is a version nsight-python and ncu-report accept (else an error naming it), or None."""
    if (given := read_ncu_path(environ)) and not ncu_accepted(version := ncu_version_of(given)):
        found = f"Nsight Compute {version_text(version)}" if version else "not Nsight Compute"
        raise ValueError(f"NCU_PATH={environ['NCU_PATH']}: {given} is {found}, not {NCU_RANGE}. {NCU_PATH_FIX}")
    return given


def cuda_started(modules=sys.modules, maps=Path("/proc/self/maps")):
    """What shows that CUDA started in this process before nsight was imported: Nsight Compute can then no longer
    attach. nsight imported before torch (sys.modules keeps import order) is a second Run all, and fine."""
    order = list(modules)
    if "nsight" in modules and ("torch" not in modules or order.index("nsight") < order.index("torch")):
        return []
    signs = [f"{name} is imported" for name in ("torch", "nsight") if name in modules]
    mapped = maps.read_text(errors="replace") if maps.is_file() else ""
    return signs + (["the CUDA driver (libcuda) is loaded"] if "libcuda.so" in mapped else [])


def require_gpu():
    """Stop unless nvidia-smi (which starts no CUDA here) names a GPU of compute capability 7.5+, as nsight asks."""
    query = ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"]
    try:
        gpu_name, capability = command_output(query).splitlines()[0].split(", ")
    except (IndexError, ValueError):
        fix = "On Colab choose Runtime > Change runtime type > T4 GPU, then Runtime > Run all."
        raise RuntimeError(f"No NVIDIA GPU is visible. {fix} Nothing has been installed.") from None
    if tuple(map(int, capability.split("."))) < (7, 5):
        raise RuntimeError(f"{gpu_name}: compute capability {capability}; nsight-python supports 7.5+")


def prepare_installs(environ=os.environ):
    """Before anything is installed: stop without a usable GPU or if CUDA already started; read the settings (a bad
    one stops here); give pip the pins as constraints (PIP_CONSTRAINT) and, offline, the wheelhouse (PIP_NO_INDEX,
    PIP_FIND_LINKS); apt-get never asks a question (DEBIAN_FRONTEND)."""
    require_gpu()
    if signs := ", ".join(cuda_started()):
        why = f"CUDA already started in this Python process ({signs}), so Nsight Compute cannot attach to it"
        raise RuntimeError(f"{why}; section 1 changed nothing. Runtime > Restart session, then Run all.")
    choice, wheelhouse = read_profiler_choice(environ), read_wheelhouse(environ)
    accepted_ncu_path(environ), read_cupti_dir(environ)  # a setting the user made is checked even where it is not used
    constraints = OUT_DIR / "pip-constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in PINS.items()))
    environ.update(PIP_CONSTRAINT=str(constraints), DEBIAN_FRONTEND="noninteractive")
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS"):
        environ.pop(name, None)
    if wheelhouse:  # the CUPTI set's wheels too, for section 9's own pip install
        environ.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=f"{wheelhouse} {wheelhouse / 'cupti'}")
    print(f"profiler: {choice}; installs from: {wheelhouse or 'PyPI and apt'}")


def check_kernel_times(times):
    """Refuse kernel times unless each is a finite time above 0: 0 or NaN means a tool attached but measured
    nothing, and committing to it would fail later."""
    if not times or not all(math.isfinite(t) and t > 0 for t in times):
        raise RuntimeError(f"the check kernel measured {times}")


def probe_child(prefix):
    """The probe (run_probe runs this function's source in a fresh Python): can nsight profile one kernel with
    Nsight Compute or, where NSPY_TUTORIAL_LIBCUPTI names a libcupti, with CUPTI bound to it? probe.json in prefix
    says how far it got ("stage"), what stopped it ("error"), the ncu on PATH and the libcupti nsight gave NVTX."""
    libcupti = os.environ.get("NSPY_TUTORIAL_LIBCUPTI")
    report = {"ncu": shutil.which("ncu"), "libcupti": None, "stage": "import nsight", "error": ""}
    try:
        if libcupti:  # before nsight: CUPTI binds to the first libcupti loaded
            ctypes.CDLL(libcupti, mode=os.RTLD_GLOBAL)
        import nsight

        if libcupti:
            nsight.activate(nsight.Tool.CUPTI)
        elif nsight.collection.ncu.injection_load_error is not None:
            raise nsight.collection.ncu.injection_load_error
        report["stage"] = "import torch"
        import torch

        report["stage"] = "profile one kernel"
        quiet = nsight.VerbosityLevel.SILENT

        @nsight.analyze.kernel(runs=1, thermal_mode="off", output_prefix=prefix, verbosity=quiet)
        def probe(n):
            x = torch.ones(n, device="cuda")
            with nsight.annotate("probe"):
                x * 2.0

        check_kernel_times(probe(1 << 16).to_dataframe().AvgValue.tolist())
        report.update(stage="done", libcupti=os.environ.get("NVTX_INJECTION64_PATH"))
    except BaseException as error:  # noqa: BLE001 - every failure is the answer, reported in the file
        report["error"] = f"{type(error).__name__}: {error}"
    Path(prefix).mkdir(parents=True, exist_ok=True)
    Path(prefix, "probe.json").write_text(json.dumps(report))


def probe_program():
    functions = "\n\n".join(inspect.getsource(function) for function in (check_kernel_times, probe_child))
    imports = "import ctypes, json, math, os, shutil, sys\nfrom pathlib import Path"
    return f"{imports}\n\n{functions}\n\nprobe_child(sys.argv[1])\n"


# What a failed probe's error says -> (kind, what it means for the learner). "driver": the next version may work.
COUNTERS_REFUSED = (
    "this machine does not allow GPU performance counters to this process; on Colab that cannot be changed from the "
    "notebook (on your own machine an administrator can allow it: NVreg_RestrictProfilingToAdminUsers=0)"
)
PROBE_CAUSES = {
    "not compatible with Nsight Compute": ("driver", "this Nsight Compute does not support the GPU's driver"),
    "ERR_NVGPUCTRPERM": ("counters", COUNTERS_REFUSED),
    "NV_INJ_ERROR": ("injection", "Nsight Compute's injection library could not attach to the process"),
}


def run_probe(prefix, log_path, env):
    """Run the probe in a child process with env: its report (probe.json in prefix), None if it did not end in
    time. Once loaded, a tool stays in a process, so the notebook's own process commits to one only after this."""
    answer = Path(prefix, "probe.json")
    answer.unlink(missing_ok=True)  # an earlier Run all's answer must never stand in for this one
    status = run_logged([sys.executable, "-c", probe_program(), prefix], log_path, TIME_LIMITS_S["probe"], env)
    if status is None:
        return None
    report = json.loads(answer.read_text()) if answer.is_file() else {"stage": "start", "error": f"exit {status}"}
    error = report["error"] or "no error text"
    cause = [line.strip() for line in error.splitlines() if "==ERROR==" in line] or error.splitlines()[:2]
    return report | {"said": f"the probe failed at '{report['stage']}': {' '.join(cause)[:300]}; see {log_path}"}


def probe_ncu(ncu_path, prefix, log_path):
    """Profile one tiny kernel with Nsight Compute in a child process: (kind, what happened); kind is "ok",
    "driver", "counters", "hang", "injection" or "failed"."""
    env = {key: value for key, value in os.environ.items() if key != "NSPY_NCU_INIT_AT_IMPORT"} | {"MPLBACKEND": "Agg"}
    if (report := run_probe(prefix, log_path, env)) is None:
        return "hang", f"the probe attached but {ended(None, 'probe')}; see {log_path}"
    if report["stage"] != "done":
        kind, meaning = next((found for key, found in PROBE_CAUSES.items() if key in report["error"]), ("failed", ""))
        return kind, f"{meaning} ({report['said']})" if meaning else report["said"]
    if not (report["ncu"] and os.path.samefile(report["ncu"], ncu_path)):
        return "failed", f"the probe's nsight used the ncu at {report['ncu']}, not {ncu_path}"
    return "ok", "profiled a kernel"


def probe_cupti(prefix, log_path):
    """Profile one tiny kernel under CUPTI, bound to the CUPTI set's libcupti, in a child process that inherits none
    of the variables Nsight Compute set here: what stopped it, or "" once it profiled."""
    libcupti = find_libcupti(CUPTI_PACKAGES_DIR)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NV_COMPUTE_PROFILER"))}
    env |= {"NSPY_NCU_INIT_AT_IMPORT": "0", "NSPY_TUTORIAL_LIBCUPTI": str(libcupti), "MPLBACKEND": "Agg"}
    put_first_on_path(CUPTI_PACKAGES_DIR, env, "PYTHONPATH")
    if (report := run_probe(prefix, log_path, env)) is None:
        return f"{ended(None, 'probe')}; see {log_path}"
    if report["stage"] != "done":
        return report["said"]
    if os.path.realpath(report["libcupti"] or "") != os.path.realpath(libcupti):
        return f"CUPTI bound to {report['libcupti']!r}, not the preloaded {libcupti}"
    return ""


def attempted(tried, label, version, kind, said):
    """One attempt, said in one line and kept for summary.json."""
    tried.append({"ncu": label, "version": version, "outcome": kind, "said": said})
    print(f"Nsight Compute {version} ({label}): {kind}, {said}")


def try_ncu(ncu, label, tried):
    """Probe `ncu` (first on PATH by now) and say the outcome; True once the backend is decided: it profiled, or
    failed in a way another version would not fix (counters refused, a hang, no injection)."""
    kind, said = probe_ncu(ncu, f"{OUT_DIR / 's1_probe'}/", OUT_DIR / "ncu_probe.log")
    attempted(tried, label, version_text(ncu_version_of(ncu)), kind, said)
    return kind != "driver"


def ready_ncus(environ):
    """(ncu, where from) to try before apt: NCU_PATH alone when set, else the accepted packages installed already
    (a re-run after a restart), newest first."""
    if given := accepted_ncu_path(environ):
        return [(given, "NCU_PATH")]
    listed = command_output(["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\\n", "nsight-com*"])
    installed = newest_first(line.split()[0] for line in listed.splitlines() if line.endswith(" installed"))
    return [(ncu, f"installed {package}") for package in installed if (ncu := package_ncu(package))]


def apt_candidates(tried):
    """After apt-get update (advisory: one broken third-party list fails it although NVIDIA's index is fine), the
    packages apt's index lists that nsight-python and ncu-report accept, newest first, but those tried already."""
    status = run_logged(["apt-get", "update"], OUT_DIR / "apt.log", TIME_LIMITS_S["apt-get update"])
    if status != 0:
        print(f"apt-get update failed ({ended(status, 'apt-get update')}; {OUT_DIR / 'apt.log'}): trying anyway")
    done = {attempt["ncu"].split()[-1] for attempt in tried}
    listed = newest_first(command_output(["apt-cache", "pkgnames", "nsight-compute-"]).split())
    return [name for name in listed if name not in done]


def try_package(package, tried, environ):
    """apt-get install the package (bounded, into apt.log), put its ncu first on PATH and probe it; True once the
    backend is decided. A package that gave no ncu is said, and an apt-get that ran out of time as such."""
    print(f"apt-get install {package} (300 to 400 MB; log: {OUT_DIR / 'apt.log'})")
    status = run_logged(["apt-get", "install", "--yes", package], OUT_DIR / "apt.log", TIME_LIMITS_S["apt-get install"])
    if (ncu := package_ncu(package)) is not None:
        put_first_on_path(ncu.parent, environ)
        return try_ncu(ncu, package, tried)
    said = f"apt-get gave no ncu ({ended(status, 'apt-get install')}): {log_tail(OUT_DIR / 'apt.log', 2)}"
    attempted(tried, package, package.removeprefix("nsight-compute-"), "no ncu", said)
    return False


def no_ncu_reason(tried, environ):
    """Why Nsight Compute is not used, from what was tried: the driver and the versions when none supported it."""
    if tried and all(attempt["outcome"] == "driver" for attempt in tried):
        driver = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) or "?"
        versions = ", ".join(attempt["version"] for attempt in tried)
        return f"no Nsight Compute tried supports driver {driver.splitlines()[0]} (tried {versions})"
    seen = ", ".join(f"{version_text(ncu_version_of(ncu))} at {ncu}" for ncu in ncus_on_path(environ["PATH"]))
    said = "".join(f"; {attempt['ncu']}: {attempt['said']}" for attempt in tried)
    offline = "; offline (NSPY_TUTORIAL_WHEELHOUSE), so apt-get was not tried" if read_wheelhouse(environ) else ""
    return f"there is no Nsight Compute {NCU_RANGE} here (ncu found: {seen or 'none'}){said}{offline}"


def check_pip_installed(environ=os.environ):
    """The pip cell's result: nsight-python at its pin, or an error that says where to look (pip exits 0 in a cell
    either way), before anything else tries to import it."""
    importlib.invalidate_caches()
    found = versions_in(sys.path).get("nsight-python", "no nsight-python")
    if found != PINS["nsight-python"]:
        fix = f"NSPY_TUTORIAL_WHEELHOUSE may lack a wheel: make_wheelhouse.py --python-version {PYTHON}"
        fix = fix if read_wheelhouse(environ) else "check the network"
        raise RuntimeError(
            f"the pip cell left {found}, not nsight-python {PINS['nsight-python']}: see its output ({fix})"
        )


def decide_ncu(environ=os.environ):
    """Try Nsight Compute versions, newest accepted first, until the probe profiles with one or another version
    would not help: an ncu already there (NCU_PATH, a re-run) first, without apt; then apt's. Offline, or with
    NSPY_TUTORIAL_PROFILER=cupti, nothing is installed. (use_ncu, reason); the attempts go to ENVIRONMENT."""
    check_pip_installed(environ)
    tried, choice = ENVIRONMENT.setdefault("ncu_attempts", []), read_profiler_choice(environ)
    tried.clear()
    decided, reason = choice == "cupti", "NSPY_TUTORIAL_PROFILER=cupti" if choice == "cupti" else ""
    for ncu, label in [] if decided else ready_ncus(environ):
        put_first_on_path(ncu.parent, environ)
        if decided := try_ncu(ncu, label, tried):
            break
    online = not (decided or read_ncu_path(environ) or read_wheelhouse(environ))
    for package in apt_candidates(tried) if online else []:
        if decided := try_package(package, tried, environ):
            break
    use_ncu = any(attempt["outcome"] == "ok" for attempt in tried)
    last = tried[-1] if tried and not use_ncu else {"outcome": "none"}
    if not (use_ncu or reason):  # a version's own failure, else why none was usable
        own = last["outcome"] not in ("none", "driver", "no ncu")
        reason = f"Nsight Compute {last['version']}: {last['said']}" if own else no_ncu_reason(tried, environ)
    if choice == "ncu" and not use_ncu:
        raise RuntimeError(f"NSPY_TUTORIAL_PROFILER=ncu, but {reason}. Set NCU_PATH, or NSPY_TUTORIAL_PROFILER=auto")
    return use_ncu, reason


def versions_in(folders):
    """{normalized name: version} of the distributions in these folders; the first one found wins, as for imports."""
    found = list(importlib.metadata.distributions(path=[str(folder) for folder in folders]))
    return {normalize(dist.metadata["Name"] or ""): dist.version for dist in reversed(found)}


def install_pins(pins, folder, wheelhouse, log_path):
    """pip install, without dependencies, into folder the pins this Python lacks (or has at another version) and
    folder does not hold yet; with a wheelhouse, offline. The Python's own site-packages are never written."""
    have = versions_in([entry for entry in sys.path if entry != str(folder)])
    in_folder = versions_in([folder])
    missing = [f"{n}=={v}" for n, v in pins.items() if v not in (have.get(normalize(n)), in_folder.get(normalize(n)))]
    offline = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    options = ["-q", "--disable-pip-version-check", *offline, "--no-deps", "--upgrade", "--target", str(folder)]
    command = [sys.executable, "-m", "pip", "install", *options, *missing]
    print(f"installing {' '.join(missing)} into {folder}" if missing else f"{folder} holds the CUPTI set already")
    status = run_logged(command, log_path, TIME_LIMITS_S["pip"]) if missing else 0
    if status != 0:
        fix = f"NSPY_TUTORIAL_WHEELHOUSE={wheelhouse} lacks a wheel: make_wheelhouse.py --python-version {PYTHON}"
        fix = fix if wheelhouse else "Check the network, or set NSPY_TUTORIAL_WHEELHOUSE (scripts/make_wheelhouse.py)"
        failed = f"pip could not install {' '.join(missing)} ({ended(status, 'pip')})"
        raise RuntimeError(f"{failed}:\n{log_tail(log_path, 8)}\n{fix}")
    return missing


def cupti_pins(have):
    """The CUPTI set; cuda-bindings only where this Python's own is older than 13 (cupti-python 13.4 needs 13)."""
    major = (have.get("cuda-bindings") or "0").split(".")[0]
    return {n: v for n, v in CUPTI_PINS.items() if n != "cuda-bindings" or not (major.isdigit() and int(major) >= 13)}


def find_libcupti(cupti_dir):
    """The libcupti.so.13 that the CUPTI install put under cupti_dir."""
    for path in sorted(Path(cupti_dir).glob("nvidia/*/lib/libcupti.so.13*")):
        return path
    raise FileNotFoundError(f"libcupti.so.13 is not under {cupti_dir}/nvidia/*/lib: run section 1 again.")


def preload_libcupti(cupti_dir):
    """Load libcupti.so.13 from the CUPTI folder before cupti, nsight or torch can load another one: cuda.pathfinder
    searches only site-packages (it would pick torch's older one), and reuses a library already loaded."""
    path, folder = find_libcupti(cupti_dir), str(cupti_dir)
    # cupti-python comes from that folder too: first on sys.path here, and on PYTHONPATH for the processes started here
    sys.path[:] = [folder, *(entry for entry in sys.path if entry != folder)]
    put_first_on_path(folder, os.environ, "PYTHONPATH")
    importlib.invalidate_caches()
    ctypes.CDLL(str(path), mode=os.RTLD_GLOBAL)
    return path


BACKEND = {}  # choose_backend's answer: use_ncu, cupti_reason, libcupti


def choose_backend(environ=os.environ):
    """Section 1's folded choice: Nsight Compute if the probe profiled with one (decide_ncu); else CUPTI, once its
    set is in its folder and the probe profiled with it. Then NSPY_NCU_INIT_AT_IMPORT=0 keeps Nsight Compute out of
    the `import nsight` that follows, and this process's libcupti is the CUPTI set's."""
    environ.pop("NSPY_NCU_INIT_AT_IMPORT", None)  # a leftover "0" would keep Nsight Compute out
    use_ncu, reason = decide_ncu(environ)
    BACKEND.update(use_ncu=use_ncu, cupti_reason=reason, libcupti=None)
    if use_ncu:
        return print(f"Measuring with Nsight Compute: {shutil.which('ncu')}")
    print(f"Measuring with CUPTI, because {reason}")
    global CUPTI_PACKAGES_DIR  # read here, where it is used: a bad value never breaks another tool's import
    CUPTI_PACKAGES_DIR, wheelhouse = read_cupti_dir(environ), read_wheelhouse(environ)
    have = versions_in([entry for entry in sys.path if entry != str(CUPTI_PACKAGES_DIR)])
    install_pins(cupti_pins(have), CUPTI_PACKAGES_DIR, wheelhouse and wheelhouse / "cupti", OUT_DIR / "pip.log")
    if failed := probe_cupti(f"{OUT_DIR / 's1_cupti'}/", OUT_DIR / "cupti_probe.log"):
        raise RuntimeError(f"Neither backend can time a kernel here. Nsight Compute: {reason}. CUPTI: {failed}")
    environ["NSPY_NCU_INIT_AT_IMPORT"] = "0"
    BACKEND["libcupti"] = preload_libcupti(CUPTI_PACKAGES_DIR)


def check_backend(nsight, use_ncu, environ=os.environ):
    """After `import nsight`: the pinned nsight-python, and the backend choose_backend chose: Nsight Compute loaded,
    or CUPTI bound to the preloaded libcupti (nsight.activate writes the file it resolved into
    NVTX_INJECTION64_PATH)."""
    if (version := nsight.__version__) != PINS["nsight-python"]:
        raise RuntimeError(f"nsight-python {version}, not {PINS['nsight-python']}, was imported: see the pip cell")
    if use_ncu != BACKEND["use_ncu"]:
        error = nsight.collection.ncu.injection_load_error
        raise RuntimeError(
            f"nsight measures with {'Nsight Compute' if use_ncu else f'CUPTI ({error})'}, but the cell above chose "
            "the other: Runtime > Restart session, then Run all, or set NSPY_TUTORIAL_PROFILER=cupti"
        )
    resolved, libcupti = environ.get("NVTX_INJECTION64_PATH", ""), BACKEND["libcupti"]
    if not use_ncu and not (resolved and Path(resolved).exists() and os.path.samefile(resolved, libcupti)):
        raise RuntimeError(
            f"CUPTI resolved {resolved or 'no library'}, not the preloaded {libcupti}: Runtime > Restart session, "
            "then Run all, running no other cell first"
        )


def environment_facts(torch, nsight):
    """What summary.json says about this machine (torch and nsight as the notebook imported them)."""
    props, ncu = torch.cuda.get_device_properties(0), shutil.which("ncu")
    driver = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).split("\n")[0]
    use_ncu = nsight.get_active_tool() == nsight.Tool.NCU
    return {
        "gpu": props.name,
        "driver": driver or "?",
        "compute_capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "l2_bytes": props.L2_cache_size,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "ncu_path": ncu,
        "ncu_version": version_text(ncu_version_of(ncu)),
        "nsight_python": nsight.__version__,
        "active_tool": str(nsight.get_active_tool()),
        "profiler": "ncu" if use_ncu else "cupti",
        "cupti_reason": BACKEND.get("cupti_reason", ""),
        "libcupti": str(BACKEND.get("libcupti") or ""),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "python": sys.version.split()[0],
    }


CUPTI_PACKAGES_DIR = None  # choose_backend reads NSPY_TUTORIAL_CUPTI_DIR
