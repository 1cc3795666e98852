"""Section 1's machinery. Nothing here imports torch or nsight, or touches CUDA.

Each function returns what it decided and why; the section 1 cells print that and act on it.
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
from pathlib import Path

# How long each outside step may take before the notebook gives up on it and says so.
TIME_LIMITS_S = {"apt_update": 600, "apt_install": 1200, "pip": 1200, "probe": 600, "cupti_child": 900}


def command_output(command, timeout=120):
    """What a command (a list) printed, without surrounding blanks; '' if it is missing, fails or times out."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip()


def run_logged(command, log_path, time_limit_s, env=None):
    """Run a command with its output appended to log_path. Its exit status, or None if it ran out of time.

    It gets its own process group, so that a time-out also ends the helpers it started (apt-get does).
    """
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(map(str, command))}\n")
        log.flush()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            return process.wait(timeout=time_limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            log.write(f"\n(stopped after {time_limit_s} s)\n")
            return None


def log_tail(log_path, lines=5):
    return "\n".join(Path(log_path).read_text(errors="replace").strip().splitlines()[-lines:])


# ---------------------------------------------------------------- stopping early
# Why section 1 installs nothing more ('' while it may go on): no GPU, or the profiler asked for cannot be had.
# Run all stops at the cell that raised; a later section 1 cell run by hand reads this and says why it does nothing.
SETUP_STOPPED = {"reason": ""}


def stop_setup(reason):
    SETUP_STOPPED["reason"] = reason
    return reason


def setup_stopped(what):
    """True, after one line saying why `what` is not done, once section 1 has stopped; else False."""
    if SETUP_STOPPED["reason"]:
        print(f"{what}: not done, because {SETUP_STOPPED['reason']}")
    return bool(SETUP_STOPPED["reason"])


def visible_gpus(smi=None):
    """[(name, compute capability)] of the GPUs nvidia-smi lists; nvidia-smi creates no CUDA context."""
    smi = smi or shutil.which("nvidia-smi")
    answer = command_output([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"]) if smi else ""
    return [tuple(part.strip() for part in line.rsplit(",", 1)) for line in answer.splitlines() if "," in line]


def stop_without_gpu():
    """Stop section 1's installs when no GPU of compute capability 7.5+ is visible (the first cell said so too).
    Returns why section 1 stops ('' when it goes on)."""
    gpus = visible_gpus()
    if not gpus:
        return stop_setup("no NVIDIA GPU is visible: on Colab choose Runtime > Change runtime type > T4 GPU")
    name, capability = gpus[0]
    if tuple(int(part) for part in capability.split(".")) < (7, 5):
        return stop_setup(f"{name} has compute capability {capability}; nsight-python needs 7.5 or newer")
    return SETUP_STOPPED["reason"]  # a GPU: only an earlier stop (a setting) stands


# ---------------------------------------------------------------- settings
PROFILER_CHOICES = ("auto", "ncu", "cupti")


def read_profiler_choice(environ=os.environ):
    """NSPY_TUTORIAL_PROFILER: auto (default), ncu or cupti."""
    choice = environ.get("NSPY_TUTORIAL_PROFILER", "auto").strip().lower() or "auto"
    if choice not in PROFILER_CHOICES:
        raise ValueError(
            f"NSPY_TUTORIAL_PROFILER={choice!r} is not one of {', '.join(PROFILER_CHOICES)}. "
            "Unset it (auto picks Nsight Compute when it can, else CUPTI) or set one of those."
        )
    return choice


def read_wheelhouse(environ=os.environ):
    """NSPY_TUTORIAL_WHEELHOUSE as a folder (offline installs), or None (PyPI and apt)."""
    given = environ.get("NSPY_TUTORIAL_WHEELHOUSE")
    if not given:
        return None
    make_one = (
        "Make one on a machine with internet access with scripts/make_wheelhouse.py (README: Offline, from a "
        "wheelhouse), or unset NSPY_TUTORIAL_WHEELHOUSE to install from PyPI."
    )
    folder = Path(given).expanduser().resolve()  # ~ and relative folders, as for every folder setting
    named = given if str(folder) == given else f"{given} ({folder})"
    if not folder.is_dir():
        raise FileNotFoundError(f"NSPY_TUTORIAL_WHEELHOUSE={named} is not a folder. {make_one}")
    if not any(folder.glob("*.whl")):
        raise FileNotFoundError(f"NSPY_TUTORIAL_WHEELHOUSE={named} holds no wheels (*.whl). {make_one}")
    return folder


def read_ncu_path(environ=os.environ):
    """NCU_PATH as the ncu executable (the file, or the folder that holds it), or None when unset.

    A path that names no file, or a file that cannot be run, is an error: a setting the user made is never
    passed over in silence.
    """
    given = environ.get("NCU_PATH")
    if not given:
        return None
    path = Path(given).expanduser()
    path = path / "ncu" if path.is_dir() else path
    fix = (
        f"set NCU_PATH to the ncu of Nsight Compute {NCU_FLOOR} or newer (or the folder that holds it), or unset it "
        "to let this notebook find or install one."
    )
    if not path.is_file():
        raise FileNotFoundError(f"NCU_PATH={given}: there is no file {path}. To fix it, {fix}")
    if not os.access(path, os.X_OK):
        raise PermissionError(f"NCU_PATH={given}: {path} is not executable. Run chmod +x {path}, or {fix}")
    return path


# ---------------------------------------------------------------- Nsight Compute
NCU_MIN_VERSION = (2026, 2, 1)  # nsight-python 1.1.0 refuses anything older
NCU_FLOOR = ".".join(map(str, NCU_MIN_VERSION))  # how every message names it
NSIGHT_COMPUTE_APT_VERSIONS = ("2026.3.1", "2026.2.1")  # nsight-compute-<version> in NVIDIA's apt repository


def parse_ncu_version(text):
    """(year, minor, patch) from `ncu --version` output, or None if there is no version line."""
    match = re.search(r"Version\s+(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(part) for part in match.groups()) if match else None


def ncu_is_recent(version):
    return version is not None and tuple(version)[:3] >= NCU_MIN_VERSION


def version_text(version):
    return ".".join(map(str, version)) if version else "none"


def ncu_version_of(path):
    return parse_ncu_version(command_output([str(path), "--version"], timeout=60))


def apt_versions_to_try(versions=NSIGHT_COMPUTE_APT_VERSIONS):
    """Newest first, and nothing nsight would refuse: an older package would only waste minutes."""
    usable = [v for v in versions if ncu_is_recent(tuple(int(p) for p in v.split(".")))]
    return sorted(usable, key=lambda v: tuple(int(p) for p in v.split(".")), reverse=True)


def ncus_on_path(path_variable):
    """Every `ncu` on PATH, in PATH order: shutil.which alone only shows the first."""
    found = []
    for folder in (path_variable or "").split(os.pathsep):
        candidate = shutil.which("ncu", path=folder) if folder else None
        if candidate and Path(candidate) not in found:
            found.append(Path(candidate))
    return found


def ncu_candidates(environ=os.environ):
    """ncu executables to consider, in order: NCU_PATH (the file or its folder), then each one on PATH."""
    given = read_ncu_path(environ)
    candidates = [given] if given else []
    candidates += ncus_on_path(environ.get("PATH"))
    return [path for path in dict.fromkeys(candidates) if path.is_file()]


def installed_ncu_from_apt(versions):
    """The ncu launcher of an already installed nsight-compute-<version> package, or None."""
    for version in versions:
        listed = command_output(["dpkg", "-L", f"nsight-compute-{version}"]).splitlines()
        launchers = [Path(line.strip()) for line in listed if line.strip().endswith("/ncu")]
        if launchers:
            return top_level_launcher(launchers)
    return None


def top_level_launcher(launchers):
    """The package's own `ncu`: the one fewest folders deep (it also ships per-platform copies further down)."""
    return min(launchers, key=lambda path: len(path.parts))


def install_ncu_with_apt(versions, log_path):
    """Install the newest nsight-compute-<version> apt can provide. Returns (ncu path or None, message)."""
    versions = apt_versions_to_try(versions)
    if not (shutil.which("apt-get") and shutil.which("dpkg")):
        return None, f"apt-get or dpkg is missing here: install Nsight Compute {NCU_FLOOR}+ yourself and set NCU_PATH"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}  # apt must never stop to ask a question
    if run_logged(["apt-get", "update", "-qq"], log_path, TIME_LIMITS_S["apt_update"], env) is None:
        return None, (
            f"apt-get update did not finish within {TIME_LIMITS_S['apt_update']} s (is NVIDIA's apt repository "
            f"reachable?); see {log_path}. Install Nsight Compute {NCU_FLOOR}+ yourself and set NCU_PATH"
        )
    for version in versions:
        command = ["apt-get", "install", "-y", "-qq", f"nsight-compute-{version}"]
        status = run_logged(command, log_path, TIME_LIMITS_S["apt_install"], env)
        if status is None:
            return None, (
                f"apt-get install nsight-compute-{version} did not finish within {TIME_LIMITS_S['apt_install']} s; "
                f"see {log_path}. Install Nsight Compute {NCU_FLOOR}+ yourself and set NCU_PATH"
            )
        if status == 0:
            path = installed_ncu_from_apt([version])
            if path is None:
                return None, f"apt-get installed nsight-compute-{version}, but dpkg -L lists no ncu in it"
            return path, f"installed nsight-compute-{version} with apt-get"
    return None, (
        f"apt-get could not install nsight-compute {' or '.join(versions)} (NVIDIA's apt repository unreachable?). "
        f"Last lines of {log_path}:\n{log_tail(log_path)}"
    )


def check_ncu_path(found, environ=os.environ):
    """NCU_PATH, when set, must be a working Nsight Compute NCU_FLOOR+: never passed over for another one."""
    given = read_ncu_path(environ)
    version = dict(found).get(given) if given else None
    if given is None or ncu_is_recent(version):
        return
    if version:
        what = f"is Nsight Compute {version_text(version)}, older than {version_text(NCU_MIN_VERSION)}"
    else:
        what = f"is not Nsight Compute (`{given} --version` prints no Nsight Compute version)"
    raise ValueError(
        f"NCU_PATH={environ['NCU_PATH']}: {given} {what}. Set NCU_PATH to the ncu of Nsight Compute {NCU_FLOOR} or "
        "newer, or unset it to let this notebook find or install one."
    )


def find_or_install_ncu(choice, wheelhouse, log_path, environ=os.environ):
    """(ncu path or None, what happened): NCU_PATH or PATH first, then an earlier apt install, then apt-get.

    With NSPY_TUTORIAL_PROFILER=ncu and no usable ncu, it raises and section 1 installs nothing more.
    """
    if setup_stopped("looking for Nsight Compute"):
        return None, SETUP_STOPPED["reason"]
    if choice == "cupti":
        read_ncu_path(environ)  # a setting the user made is checked even where it is not used
        return None, "NSPY_TUTORIAL_PROFILER=cupti, so Nsight Compute is not looked for"
    found = [(path, ncu_version_of(path)) for path in ncu_candidates(environ)]
    for path, version in found:
        print(f"found ncu {version_text(version)} at {path}")
    check_ncu_path(found, environ)
    chosen, message = recent_or_installed_ncu(found, wheelhouse, log_path)
    if chosen is None and choice == "ncu":
        raise RuntimeError(
            stop_setup(
                f"NSPY_TUTORIAL_PROFILER=ncu, but there is no usable Nsight Compute: {message}. Set NCU_PATH to an "
                f"ncu {NCU_FLOOR}+, or set NSPY_TUTORIAL_PROFILER=auto (or cupti) to run on CUPTI"
            )
        )
    return chosen, message


def recent_or_installed_ncu(found, wheelhouse, log_path):
    chosen = next((path for path, version in found if ncu_is_recent(version)), None)
    if chosen is not None:
        return chosen, f"ncu {version_text(ncu_version_of(chosen))} was already there"
    too_old = ", ".join(f"{version_text(v)} at {p}" for p, v in found) or "none"
    chosen = installed_ncu_from_apt(apt_versions_to_try())  # installed by an earlier Run all?
    if chosen is not None:
        return chosen, "installed by apt-get earlier"
    if wheelhouse:
        return None, (
            f"no ncu {version_text(NCU_MIN_VERSION)}+ here (found: {too_old}), and with a wheelhouse the install is "
            f"offline, so apt-get was not tried. Set NCU_PATH to an ncu {NCU_FLOOR}+ to use Nsight Compute"
        )
    print("installing Nsight Compute with apt-get (a few minutes) ...")
    chosen, message = install_ncu_with_apt(apt_versions_to_try(), log_path)
    if chosen is None:
        return None, f"no ncu {version_text(NCU_MIN_VERSION)}+ here (found: {too_old}); {message}"
    return chosen, message


def put_first_on_path(folder, environ=os.environ):
    """Put folder at the front of PATH, and nowhere else, even if it was already further back."""
    others = [entry for entry in environ.get("PATH", "").split(os.pathsep) if entry and entry != str(folder)]
    environ["PATH"] = os.pathsep.join([str(folder), *others])


# ---------------------------------------------------------------- Python packages
def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


# What the notebook installs, pinned: requirements.txt's text (the setup-helpers cell embeds the file instead).
# nsight-python's own requirements are listed too, because the installs use --no-deps: pip never picks a version.
REQUIREMENTS = (Path(__file__).resolve().parent.parent / "requirements.txt").read_text()
CUPTI_MARKER = "# [cupti]"  # the line of requirements.txt after which the CUPTI backend's set is listed


def pins_from_requirements(text):
    """({name: version} of the notebook's pins, the same for the CUPTI set after CUPTI_MARKER) from requirements.txt."""
    main, cupti = {}, {}
    current = main
    for line in text.splitlines():
        if line.startswith(CUPTI_MARKER):
            current = cupti
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            name, _, version = requirement.partition("==")
            current[name.strip()] = version.strip()
    return main, cupti


PINS, CUPTI_PINS = pins_from_requirements(REQUIREMENTS)
EXPECTED_PRESENT = ("numpy", "pandas", "matplotlib", "cuda-bindings", "cuda-pathfinder")  # Colab has these
INSTALL_ROOT = Path.home() / ".cache" / "nspy_tutorial"
PACKAGES_DIR = INSTALL_ROOT / "packages"


def can_make_folder(path):
    """Whether a folder can be made at `path`: tried with a scratch folder in its nearest existing parent, removed at
    once (a pseudo-filesystem such as /proc refuses even root)."""
    parent = next(folder for folder in Path(path).parents if folder.exists())
    try:
        os.rmdir(tempfile.mkdtemp(dir=parent))
    except OSError:
        return False
    return True


def read_cupti_dir(environ=os.environ):
    """NSPY_TUTORIAL_CUPTI_DIR: the folder the CUPTI backend's packages go into (created if missing)."""
    given = environ.get("NSPY_TUTORIAL_CUPTI_DIR")
    if not given:
        return INSTALL_ROOT / "cupti13"
    path = Path(given).expanduser().resolve()
    if not path.exists() and not can_make_folder(path):
        raise ValueError(
            stop_setup(
                f"NSPY_TUTORIAL_CUPTI_DIR={given}: the folder {path} cannot be made there. The setting names the "
                "folder the CUPTI backend's packages are installed into: set it to a folder you can write to, or "
                f"unset it for {INSTALL_ROOT / 'cupti13'}"
            )
            + "."
        )
    if path.exists() and not path.is_dir():
        raise ValueError(
            stop_setup(
                f"NSPY_TUTORIAL_CUPTI_DIR={given}: {path} is a file, not a folder. The setting names the folder the "
                "CUPTI backend's packages are installed into (created if missing): set it to a folder, or unset it "
                f"for {INSTALL_ROOT / 'cupti13'}"
            )
            + "."
        )
    return path


CUPTI_PACKAGES_DIR = read_cupti_dir()


def versions_in(folders):
    """{normalized name: version} of the distributions in these folders; the first one found wins, as for imports."""
    found = {}
    for dist in importlib.metadata.distributions(path=[str(folder) for folder in folders]):
        found.setdefault(normalize(dist.metadata["Name"] or ""), dist.version)
    return found


def versions_outside_tutorial():
    """What this Python has without the tutorial's own folders: Colab's packages, as Colab installed them."""
    own = {str(PACKAGES_DIR), str(CUPTI_PACKAGES_DIR)}
    return versions_in([entry for entry in sys.path if entry not in own])


def installed_version(distribution):
    """The version this Python sees first on sys.path, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def imported_from(distribution):
    """The folder this Python imports a distribution from (the first on sys.path), or None."""
    try:
        return Path(importlib.metadata.distribution(distribution).locate_file("")).resolve()
    except importlib.metadata.PackageNotFoundError:
        return None


def pins_to_install(pins, have, already_in_folder):
    """The pins this Python lacks or has at another version, minus those already in the tutorial's folder."""
    wanted = {name: version for name, version in pins.items() if have.get(normalize(name)) != version}
    return {name: version for name, version in wanted.items() if already_in_folder.get(normalize(name)) != version}


def pip_install(requirements, log_path, wheelhouse=None, target=None):
    """pip install pinned requirements, without dependencies, into target; with a wheelhouse, offline."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if wheelhouse:
        command += ["--no-index", "--find-links", str(wheelhouse)]
    if target:
        command += ["--no-deps", "--upgrade", "--target", str(target)]
    command += list(requirements)
    status = run_logged(command, log_path, TIME_LIMITS_S["pip"])
    if status != 0:
        ending = f"exit {status}" if status is not None else f"no answer within {TIME_LIMITS_S['pip']} s"
        if wheelhouse:
            what_to_do = (
                f"The wheelhouse {wheelhouse} (NSPY_TUTORIAL_WHEELHOUSE) lacks a wheel pip needs for this Python: "
                "make it again with scripts/make_wheelhouse.py --python-version "
                f"{sys.version_info.major}.{sys.version_info.minor}."
            )
        else:
            what_to_do = (
                "Check the network, or point NSPY_TUTORIAL_WHEELHOUSE at a wheelhouse made by "
                "scripts/make_wheelhouse.py."
            )
        raise RuntimeError(
            f"pip could not install {' '.join(requirements)} ({ending}):\n{log_tail(log_path, 8)}\n{what_to_do}"
        )


def put_first_on_sys_path(folder):
    """Import from folder before site-packages, in this process and in the child processes it starts."""
    folder = str(folder)
    sys.path[:] = [folder, *(entry for entry in sys.path if entry != folder)]
    others = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and entry != folder]
    os.environ["PYTHONPATH"] = os.pathsep.join([folder, *others])
    importlib.invalidate_caches()


def install_pins(pins, folder, wheelhouse, log_path):
    """Install into folder what this Python lacks; Colab's site-packages are never written. Returns the installs"""
    have = versions_outside_tutorial()
    absent = [name for name in EXPECTED_PRESENT if normalize(name) not in have]
    if absent:
        raise RuntimeError(f"this Python lacks {', '.join(absent)}: use a Colab GPU runtime or install them first")
    missing = pins_to_install(pins, have, versions_in([folder]))
    if missing:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name, version in missing.items():
            print(f"  {name} {version} into {folder} (this Python has {have.get(normalize(name), 'none')})")
        pip_install([f"{n}=={v}" for n, v in missing.items()], log_path, wheelhouse=wheelhouse, target=folder)
    return missing


def needs_own_cuda_bindings(installed_version):
    """cupti-python 13.4 needs cuda-bindings 13: the CUPTI folder gets its own only where the Python's is older."""
    major = (installed_version or "0").split(".")[0]
    return not (major.isdigit() and int(major) >= 13)


def cupti_pins(have):
    """The CUPTI set; cuda-bindings only when this Python's own is older than 13."""
    pins = dict(CUPTI_PINS)
    if not needs_own_cuda_bindings(have.get("cuda-bindings")):
        del pins["cuda-bindings"]
    return pins


# ---------------------------------------------------------------- libcupti
def find_libcupti(cupti_dir):
    """The libcupti.so.13 that the CUPTI install put under cupti_dir."""
    found = sorted(Path(cupti_dir).glob("nvidia/*/lib/libcupti.so.13*"))
    if not found:
        raise FileNotFoundError(
            f"libcupti.so.13 is not under {cupti_dir}/nvidia/*/lib. Re-run the CUPTI install cell "
            "(it installs nvidia-cuda-cupti 13.4+ there)."
        )
    return found[0]


def preload_libcupti(cupti_dir):
    """Load libcupti.so.13 from the CUPTI folder before cupti, nsight or torch can load another one.

    cuda.pathfinder only searches site-packages, so it would otherwise pick an older libcupti (for
    example torch's); once a library with that soname is loaded, pathfinder reuses it.
    """
    if SETUP_STOPPED["reason"]:
        raise RuntimeError(f"section 1 stopped earlier, because {SETUP_STOPPED['reason']}")
    put_first_on_sys_path(cupti_dir)  # cupti-python itself comes from there too
    path = find_libcupti(cupti_dir)
    ctypes.CDLL(str(path), mode=os.RTLD_GLOBAL)
    return path


def require_ncu_loaded(nsight):
    """After `import nsight` on the Nsight Compute path: it must have loaded Nsight Compute, as the probe did."""
    if nsight.get_active_tool() != nsight.Tool.NCU:
        raise RuntimeError(
            f"nsight did not load Nsight Compute here ({nsight.collection.ncu.injection_load_error}), although "
            "the probe could. Restart the runtime and Run all, or set NSPY_TUTORIAL_PROFILER=cupti."
        )


def check_cupti_library(preloaded, environ=os.environ):
    """The libcupti that CUPTI really resolved must be the preloaded one.

    nsight.activate(nsight.Tool.CUPTI) writes the file it resolved into NVTX_INJECTION64_PATH.
    """
    resolved = environ.get("NVTX_INJECTION64_PATH", "")
    if not (resolved and Path(resolved).exists() and os.path.samefile(resolved, preloaded)):
        raise RuntimeError(
            f"CUPTI resolved {resolved or 'no library'}, not the preloaded {preloaded}: something loaded another "
            "libcupti first. Restart the runtime and Run all, without running other cells before section 1."
        )
    return Path(resolved)


# ---------------------------------------------------------------- the backend probe
PROBE_SCRIPT = (Path(__file__).resolve().parent / "ncu_probe.py").read_text()  # the setup-helpers cell embeds it
PROBE_REMEDIES = (
    ("ERR_NVGPUCTRPERM", "this user may not read the GPU's performance counters: run as root, or allow them "
     "for all users (NVreg_RestrictProfilingToAdminUsers=0, see the README)"),
    ("or later is required", f"nsight found an ncu that is too old: put Nsight Compute {NCU_FLOOR}+ first on PATH"),
    ("ncu-report", "install an ncu-report at least as new as the ncu in use"),
    ("injection library", "this ncu's injection library does not load in this Python on this machine"),
    ("No module named 'torch'", "the probe needs a CUDA build of PyTorch in this Python"),
    ("NV_INJ_ERROR", "Nsight Compute could not attach to the process: its version may not support this driver"),
)  # fmt: skip


def explain_probe_failure(report):
    """One line: where the probe failed, the lines of the error that name the cause, and what to do."""
    error = report.get("error") or "no error text"
    cause = [line.strip() for line in error.splitlines() if "==ERROR==" in line] or error.strip().splitlines()[:2]
    remedy = next((text for key, text in PROBE_REMEDIES if key in error), "see ncu_probe.log in the output folder")
    return f"the Nsight Compute probe failed at '{report.get('stage')}': {' '.join(cause)[:400]}. What to do: {remedy}"


def probe_ncu(ncu_path, prefix, log_path, script=None):
    """Profile one tiny kernel with Nsight Compute in a child process (plumbing/ncu_probe.py, or `script`).
    Returns (usable, reason if not)."""
    script = script or PROBE_SCRIPT
    env = {key: value for key, value in os.environ.items() if key != "NSPY_NCU_INIT_AT_IMPORT"}
    env["MPLBACKEND"] = "Agg"
    Path(log_path).write_text("")
    status = run_logged([sys.executable, "-c", script, prefix], log_path, TIME_LIMITS_S["probe"], env)
    if status is None:
        return False, f"the Nsight Compute probe did not finish within {TIME_LIMITS_S['probe']} s; see {log_path}"
    lines = [line for line in Path(log_path).read_text(errors="replace").splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {"stage": "start", "error": f"exit {status}, see {log_path}"}
    if report["stage"] != "done":
        return False, explain_probe_failure(report)
    if not (report["ncu"] and os.path.samefile(report["ncu"], ncu_path)):
        return False, f"the probe's nsight used ncu at {report['ncu']}, not the chosen {ncu_path}"
    return True, ""


# ---------------------------------------------------------------- the environment section 1 records
def environment_facts(torch, nsight, profiler, cupti_reason="", libcupti=None):
    """What summary.json and the recordings say about this machine. torch and nsight are passed in, already
    imported in the right order (this module imports neither)."""
    props = torch.cuda.get_device_properties(0)
    ncu = shutil.which("ncu")
    driver = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return {
        "gpu": props.name,
        "driver": driver.split("\n")[0] or "?",
        "compute_capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "l2_bytes": props.L2_cache_size,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "ncu_path": ncu,
        "ncu_version": version_text(ncu_version_of(ncu)) if ncu else "none",
        "nsight_python": nsight.__version__,
        "active_tool": str(nsight.get_active_tool()),
        "profiler": profiler,
        "cupti_reason": cupti_reason,
        "libcupti": str(libcupti or ""),
        "packages_dir": str(PACKAGES_DIR),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "python": sys.version.split()[0],
    }


# ---------------------------------------------------------------- section 9's CUPTI child
# What a process with Nsight Compute loaded sets for its children: a CUPTI child must not inherit it.
NSIGHT_COMPUTE_INJECTION_VARIABLES = (
    "NVTX_INJECTION64_PATH",
    "NV_COMPUTE_PROFILER_PERFWORKS_DIR",
    "NV_COMPUTE_PROFILER_IN_PROCESS",
)


def child_environment(libcupti, environ=os.environ):
    """This process's environment without Nsight Compute's variables, set up for a CUPTI child."""
    env = {key: value for key, value in environ.items() if key not in NSIGHT_COMPUTE_INJECTION_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CUPTI_PACKAGES_DIR), env.get("PYTHONPATH")]))
    return env | {"NSPY_NCU_INIT_AT_IMPORT": "0", "NSPY_TUTORIAL_LIBCUPTI": str(libcupti), "MPLBACKEND": "Agg"}


def run_cupti_child(benchmark, sizes, folder, child_source, python=sys.executable):
    """Profile `benchmark` under CUPTI in a fresh Python, one size per call; return its result.

    The child is `child_source` (plumbing/cupti_child.py's text; section 9's folded cell binds it as
    CUPTI_CHILD_SOURCE), written to `folder` beside the benchmark's own source.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cupti_child.py").write_text(child_source)
    (folder / "benchmark.py").write_text(inspect.getsource(benchmark))
    libcupti = find_libcupti(CUPTI_PACKAGES_DIR)
    command = [python, str(folder / "cupti_child.py"), str(folder / "benchmark.py"), benchmark.__name__,
               json.dumps(sizes), f"{folder}/"]  # fmt: skip
    try:  # a child that hangs (a kernel that never ends) is killed at its time limit
        done = subprocess.run(
            command, env=child_environment(libcupti), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=TIME_LIMITS_S["cupti_child"],
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"the CUPTI child did not finish within {TIME_LIMITS_S['cupti_child']} s and was stopped; run the cell "
            "again, and if it hangs again, restart the runtime (a kernel of the benchmark may never end)"
        ) from None
    if done.returncode != 0:
        raise RuntimeError(
            f"the CUPTI child exited with {done.returncode}; its last lines: "
            + " | ".join(done.stdout.splitlines()[-6:])
        )
    result = json.loads((folder / "child_result.json").read_text())
    if os.path.realpath(result["libcupti"]) != os.path.realpath(libcupti):
        raise RuntimeError(
            f"CUPTI bound to {result['libcupti']!r} instead of the preloaded {libcupti} (see README: wrong libcupti)"
        )
    return result
