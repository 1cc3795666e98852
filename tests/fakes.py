"""Every fake command the suite runs, in one place (each function says what it makes). Nothing imitates nsight, torch
or CUDA."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def calls(root: Path, tool: str | None = None) -> list[dict]:
    """What the fake commands logged in root/calls.jsonl (each call's tool and argv), of one tool or all."""
    path = Path(root) / "calls.jsonl"
    logged = map(json.loads, path.read_text().splitlines()) if path.exists() else []
    return [call for call in logged if tool in (None, call["tool"])]


# ---------------------------------------------------------------- ncu
NCU = """#!{python}
import json, sys
from pathlib import Path

args, version, machine, log = sys.argv[1:], {version!r}, {machine!r}, {log!r}
if log:
    Path(log).write_text(json.dumps(args))
if args[:1] == ["--version"]:
    print(f"NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion {{version}}.0 (build 36000000)")
elif args[:1] == ["--list-injection-path-64"]:  # the folder nsight loads the injection library from
    print({injection!r})
elif machine:  # it profiles as the machine says for its version
    behaviour = json.loads(Path(machine, "machine.json").read_text())["profiles"].get(version, "no gpu")
    print({profiles!r}[behaviour])
    sys.exit(0 if behaviour == "works" else 1)
elif "--call" in args:  # a profiled call: what the inner would have written
    work = Path(args[args.index("--work") + 1])
    print("==PROF== Report:", work / "out" / "s4_all_none" / "report.ncu-rep", "by", sys.executable)  # as ncu says
else:
    sys.exit(f"this fake ncu does not answer {{args}}")
"""
PROFILES = {  # what the fake ncu prints when it profiles, as the real one does in each case
    "works": "==PROF== Profiling the probe kernel: 1 pass",
    "driver": "==ERROR== Cuda driver is not compatible with Nsight Compute.",
    "counters": "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
    "Counters on the target device 0.",
    "no gpu": "==ERROR== this fake ncu cannot profile: there is no GPU here",
}


def ncu(
    folder: Path, version: str, machine: Path | None = None, injection: Path | None = None, log: Path | None = None
) -> Path:
    """folder/ncu, a fake Nsight Compute `version` (2026.3.1: `--version` says 2026.3.1.0). With `machine` it
    profiles as that FakeMachine says; else launch mode's: it notes its command line in `log`. `injection`: the
    folder it names for nsight's injection library (default: folder/injection)."""
    given = {"machine": machine and str(machine), "log": log and str(log)}
    injection = str(injection or folder / "injection")
    text = NCU.format(python=sys.executable, version=version, injection=injection, profiles=PROFILES, **given)
    return executable(folder / "ncu", text)


# ---------------------------------------------------------------- pip (python -m pip) and nvidia-smi
PIP = """import json, os, re, sys
from pathlib import Path

ROOT, args, lacking = Path({root!r}), sys.argv[1:], {lacking!r}
env = {{name: os.environ.get(name) for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_CONSTRAINT")}}
with open(ROOT / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"tool": "pip", "argv": args, **env}}) + "\\n")
target, links = (Path(args[args.index(o) + 1]) if o in args else None for o in ("--target", "--find-links"))
pins = [arg.split("==") for arg in args if "==" in arg]
if "-r" in args:
    lines = Path(args[args.index("-r") + 1]).read_text().splitlines()
    pins += [line.split("#")[0].strip().split("==") for line in lines if "==" in line.split("#")[0]]
if args[0] == "download":  # an empty wheel for each pin and (without --no-deps) a dependency, unless it lacks one
    python = args[args.index("--python-version") + 1]
    if python in lacking:
        sys.exit(f"ERROR: No matching distribution found for {{lacking[python]}}")
    for name, version in pins + ([] if "--no-deps" in args else [["numpy", "2.5.2"]]):  # the runner has numpy
        wheel = f"{{name.replace('-', '_').lower()}}-{{version}}-py3-none-any.whl"
        Path(args[args.index("--dest") + 1], wheel).write_text("")
    sys.exit()
for name, version in pins:
    wheel = re.sub(r"[-_.]+", "_", name).lower() + f"-{{version}}-*.whl"
    if "--no-index" in args and not (links and list(links.glob(wheel))):
        sys.exit(f"ERROR: No matching distribution found for {{name}}=={{version}} (no {{wheel}} in {{links}})")
for name, version in pins:  # without --target: into the Python's own packages (Colab's site-packages)
    info = (target or ROOT / "site") / (re.sub(r"[-_.]+", "_", name) + f"-{{version}}.dist-info")
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\\nName: {{name}}\\nVersion: {{version}}\\n")
    if name.replace("_", "-") == "nvidia-cuda-cupti":
        (target / "nvidia/cu13/lib").mkdir(parents=True, exist_ok=True)
        (target / "nvidia/cu13/lib/libcupti.so.13").write_text("not a real library")
"""


def pip(root: Path, lacking: dict[str, str] | None = None) -> Path:
    """root/py/pip, a `python -m pip` that logs to root/calls.jsonl; its download lacks a wheel for the Python
    versions in `lacking` ({version: the pin it names}). Returns the folder to put on PYTHONPATH."""
    (package := root / "py" / "pip").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(PIP.format(root=str(root), lacking=lacking or {}))
    return package.parent


def nvidia_smi(folder: Path, gpu: str | None = "NVIDIA H200") -> Path:
    """folder/nvidia-smi as `nvidia-smi -L` answers with one GPU, or with none (gpu=None)."""
    listing = f"echo 'GPU 0: {gpu} (UUID: GPU-00000000)'" if gpu else "echo 'No devices were found'; exit 6"
    return executable(folder / "nvidia-smi", f"#!/bin/sh\n{listing}\n")


# ---------------------------------------------------------------- FakeMachine: section 1's simulated machine
TOOL = """#!{python}
import json, os, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, {tests!r})
import fakes

ROOT = Path({root!r})
machine = json.loads((ROOT / "machine.json").read_text())
tool, args = Path(sys.argv[0]).name, sys.argv[1:]
with open(ROOT / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"tool": tool, "argv": args, "DEBIAN_FRONTEND": os.environ.get("DEBIAN_FRONTEND")}}) + "\\n")
listed = {{path.stem: path for path in (ROOT / "dpkg").glob("*.list")}}
if tool == "nvidia-smi":
    if not machine["gpu"]:
        sys.exit("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    name, capability = machine["gpu"].split(", ")
    fields = {{"name": name, "compute_cap": capability, "driver_version": machine["driver"]}}
    query = next(arg for arg in args if arg.startswith("--query-gpu=")).split("=", 1)[1].split(",")
    print(", ".join(fields[field] for field in query))
elif tool == "dpkg":
    if args[-1] not in listed:
        sys.exit(f"dpkg-query: package '{{args[-1]}}' is not installed")
    print(listed[args[-1]].read_text(), end="")
elif tool == "dpkg-query":
    print("".join(f"{{name}} installed\\n" for name in sorted(listed)), end="")
elif tool == "apt-cache":
    print("\\n".join(name for name in fakes.NCU_PACKAGES if name.startswith(args[-1])))
elif tool == "apt-get":
    (ROOT / "apt.pid").write_text(str(os.getpid()))
    if machine["apt"] == "hangs":  # real apt-get hangs in a helper (its http method)
        (ROOT / "apt-helper.pid").write_text(str(subprocess.Popen(["sleep", "3600"]).pid))
        time.sleep(3600)
    if machine["apt"] == "unreachable":
        sys.exit("E: Failed to fetch https://developer.download.nvidia.com/ Could not resolve host")
    if args[0] == "install":
        if "--yes" not in args and "-y" not in args:
            sys.exit("Do you want to continue? [Y/n] Abort.")  # without a terminal, apt-get aborts
        package = args[-1]
        if package not in fakes.NCU_PACKAGES:
            sys.exit(f"E: Unable to locate package {{package}}")
        if package in machine["broken"]:
            print(f"Get:1 https://developer.download.nvidia.com/ {{package}} [312 MB]")
            sys.exit("E: Failed to fetch https://developer.download.nvidia.com/ Connection reset by peer")
        version = package.rsplit("-", 1)[-1]
        print(f"Get:1 https://developer.download.nvidia.com/ {{package}} {{version}}-1 [312 MB]")
        home = ROOT / "opt/nvidia/nsight-compute" / version
        files = [fakes.ncu(folder, version, ROOT, machine["injection"])  # dpkg -L lists both
                 for folder in (home, home / "target/linux-desktop-glibc_2_11_3-x64")]
        (ROOT / "dpkg" / (package + ".list")).write_text("\\n".join(map(str, [home, *files])) + "\\n")
"""
# A probe that stands in for probe_program where no GPU and no torch are: it profiles by running the ncu first on PATH,
# and under CUPTI (NSPY_TUTORIAL_LIBCUPTI set) it fails to, as the real one would here.
STAND_IN_PROBE = """import json, os, shutil, subprocess, sys
from pathlib import Path
ncu = shutil.which("ncu")
if os.environ.get("NSPY_TUTORIAL_LIBCUPTI"):
    stage, error = "profile one kernel", "RuntimeError: CUPTI found no GPU here"
else:
    done = subprocess.run([ncu, "--profile-probe-kernel"], capture_output=True, text=True)
    stage, error = ("done", "") if done.returncode == 0 else ("profile one kernel", "ProfilerException: " + done.stdout)
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
Path(sys.argv[1], "probe.json").write_text(json.dumps({"ncu": ncu, "stage": stage, "error": error}))
"""


def build_fake_injection_library(folder: Path) -> Path | None:
    """A real shared library that ctypes can load, with the two symbols nsight looks up in Nsight Compute's injection
    library (None without cc)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    library, source = folder / "libcuda-injection.so", folder / "libcuda-injection.c"
    source.write_text("int nvInjBeginProfiling(void) { return 0; }\nint nvInjEndProfiling(void) { return 0; }\n")
    done = subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], capture_output=True)
    source.unlink()
    return library if done.returncode == 0 else None


# What `apt-cache pkgnames nsight-compute-` lists, in no version order: CUDA's and the docs' names, versions of all ages
VERSIONS_IN_APT = "2026.3.0 12-8 2022.4.1 2026.3.1 2025.3.1 2026.2.0 2026.4.0 2026.2.1 2026.3.1-doc 2026.1.0".split()
NCU_PACKAGES = ["nsight-compute", *(f"nsight-compute-{version}" for version in VERSIONS_IN_APT)]


@dataclass
class FakeMachine:
    """Section 1's simulated machine: bin/ nvidia-smi, apt-get, apt-cache, dpkg (one program), its ncus; its pip; site/
    the Python's own packages (empty until pip installs there). apt's index lists NCU_PACKAGES."""

    root: Path
    gpu: str | None = "Tesla T4, 7.5"  # what nvidia-smi answers for name,compute_cap
    driver: str = "580.82.07"  # Colab's T4 driver (environments.md)
    path_ncus: list[str] = field(default_factory=lambda: ["2025.1.1"])  # ncu versions on PATH, in PATH order
    apt: str = "works"  # works | unreachable | hangs
    broken: list[str] = field(default_factory=list)  # packages whose download fails
    profiles: dict[str, str] = field(default_factory=dict)  # ncu version -> a PROFILES key (default "no gpu")
    injection: str = "missing"  # missing | loadable: whether the injection folder ncu names has the library
    env: dict[str, str] = field(default_factory=dict)

    def build(self) -> dict[str, str]:
        """Make the machine; the environment a kernel on it runs with."""
        for folder in ("bin", "home", "cwd", "dpkg"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / "calls.jsonl").write_text("")
        self.save()
        tool = TOOL.format(python=sys.executable, root=str(self.root), tests=str(Path(__file__).parent))
        for name in ("nvidia-smi", "apt-get", "apt-cache", "dpkg", "dpkg-query"):
            executable(self.root / "bin" / name, tool)
        pip(self.root)
        path = [self.root / "bin", *map(self.ncu_folder, self.path_ncus), "/usr/bin", "/bin"]
        env = {
            "PATH": os.pathsep.join(map(str, path)),
            "HOME": str(self.root / "home"),
            "MPLBACKEND": "Agg",
            "PYTHONPATH": f"{self.root / 'py'}{os.pathsep}{self.root / 'site'}",
            "NSPY_TUTORIAL_OUT": str(self.root / "out"),
        }
        return {**env, **self.env}

    def save(self) -> None:
        """Write what the tools answer (again after a test changes the machine)."""
        built = (self.root / "injection" / "libcuda-injection.so").exists()
        if self.injection == "loadable" and not built and build_fake_injection_library(self.root / "injection") is None:
            raise RuntimeError("no C compiler to build the fake injection library")
        facts = {name: getattr(self, name) for name in ("gpu", "driver", "apt", "broken", "profiles")}
        facts["injection"] = str(self.root / "injection") if self.injection == "loadable" else None  # None: ncu's own
        (self.root / "machine.json").write_text(json.dumps(facts))

    def ncu_folder(self, version: str) -> Path:
        injection = json.loads((self.root / "machine.json").read_text())["injection"]
        return ncu(self.root / f"path-ncu-{version}", version, self.root, injection).parent

    def calls(self, tool: str | None = None) -> list[dict]:
        return calls(self.root, tool)

    def apt_installs(self) -> list[str]:
        return [call["argv"][-1] for call in self.calls("apt-get") if call["argv"][0] == "install"]


def clean_environment() -> dict[str, str]:
    """This process's environment without the settings a simulated machine decides for itself."""
    drop = ("NSPY_", "NCU_", "NVTX_", "NV_COMPUTE_", "PYTHONPATH", "HOME", "DEBIAN_FRONTEND")
    return {key: value for key, value in os.environ.items() if not key.startswith(drop)}


def make_wheelhouse(folder: Path, pins: dict[str, str], cupti_pins: dict[str, str]) -> Path:
    """Empty files named like the wheels, laid out as scripts/make_wheelhouse.py lays them out."""
    for directory, wanted in ((folder, pins), (folder / "cupti", cupti_pins)):
        directory.mkdir(parents=True, exist_ok=True)
        for name, version in wanted.items():
            (directory / f"{name.replace('-', '_').lower()}-{version}-py3-none-any.whl").write_text("")
    return folder


# ---------------------------------------------------------------- the shell scripts' machine
FAKE_PYTHON = """#!/bin/sh
# A python3 that logs each call (FAKE_LOG), answers as FAKE_* say, runs -c code and scripts in the real Python.
echo "$*" >> "$FAKE_LOG"
case "$1" in
  -c) case "$2" in
        *version_info*) exec "$FAKE_REAL_PYTHON" -c "import sys
sys.version_info = tuple(map(int, '${FAKE_PYTHON_VERSION:-3.12.3}'.split('.'))) + ('final', 0)
$2" ;;
        *nbmake*) exit "${FAKE_HARNESS_MISSING:-0}" ;;  # run_headless's check for the harness
        *torch.version.cuda*) case "${FAKE_TORCH_CUDA:-13.0}" in  # its check for a CUDA build of torch
            missing) echo "ModuleNotFoundError: No module named 'torch'" >&2; exit 1 ;;
            *) echo "2.11.0 ${FAKE_TORCH_CUDA:-13.0}"; exit 0 ;;
          esac ;;
        *) shift; exec "$FAKE_REAL_PYTHON" -c "$@" ;;  # with the arguments after the code, as python has them
      esac ;;
  *.py) exec "$FAKE_REAL_PYTHON" "$@" ;;
esac
case "$2" in
  venv) mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit ;;  # failing where python -m venv would
  ipykernel) exec env -u PYTHONPATH "$FAKE_REAL_PYTHON" "$@" ;;  # a real kernel spec, where told (IPython: installed)
  pip) python="$0"; shift 2; exec "$FAKE_REAL_PYTHON" "$FAKE_PIP" "$python" "$@" ;;
  pytest) [ -n "${NSPY_TUTORIAL_OUT:-}" ] && cp "$FAKE_EXECUTED" "$NSPY_TUTORIAL_OUT/nsight_python_t4_tutorial.ipynb" \
            && cp "$(dirname "$FAKE_EXECUTED")/summary.json" "$NSPY_TUTORIAL_OUT/summary.json"
          "$FAKE_REAL_PYTHON" -c 'from jupyter_client.kernelspec import KernelSpecManager as Specs
print("the python3 kernel:", Specs().get_kernel_spec("python3").resource_dir)'
          echo "fake pytest, cell timeout ${NSPY_TUTORIAL_CELL_TIMEOUT:-} s"; exit "${FAKE_PYTEST_EXIT:-0}" ;;
esac
exit 0
"""


def requirement_pins(path: Path, constraints: dict[str, str | None] | None = None) -> dict[str, str | None]:
    """name -> version (None when unpinned) of a requirements file, following -r; its -c files go to constraints."""
    pins: dict[str, str | None] = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#")[0].strip()
        included = Path(path).parent / line[3:].strip()
        if line.startswith("-r "):
            pins.update(requirement_pins(included, constraints))
        elif line.startswith("-c "):
            (constraints if constraints is not None else {}).update(requirement_pins(included, constraints))
        elif line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip() or None
    return pins


def script_pip(python: str, args: list[str]) -> int:
    """The fake python's `-m pip` as the scripts call it: freeze lists its packages; install checks that every
    requirement can be had (offline: its wheel in --find-links) and logs what, from where and into which Python."""
    if args[:1] == ["--version"]:  # run_tests asks whether its venv has pip
        print(f"pip 25.0 from {python}")
        return 0
    if args[:1] == ["freeze"]:
        print("torch==2.11.0")  # what the fake python has before anything is installed
        return 0
    if os.environ.get("FAKE_PIP_FAILS"):  # no network
        sys.stderr.write("ERROR: Could not find a version that satisfies the requirement pytest==9.1.1\n")
        return 1
    given = {option: args[args.index(option) + 1] for option in ("-r", "-c", "--find-links") if option in args}
    record = {
        "python": python,
        "index": None if "--no-index" in args else "PyPI",
        "constraints": {},
        "find_links": given.get("--find-links"),
    }
    record["requirements"] = requirement_pins(Path(given["-r"]), record["constraints"])
    record["constraints"].update(requirement_pins(Path(given["-c"]), record["constraints"]))  # the scripts give both
    for name, version in record["requirements"].items():
        wheel = f"{name.replace('-', '_')}-{version or ''}*.whl"
        if record["index"] is None and not (record["find_links"] and list(Path(record["find_links"]).glob(wheel))):
            sys.stderr.write(f"ERROR: No matching distribution found for {name}=={version} (no index, no {wheel})\n")
            return 1
    with open(os.environ["FAKE_INSTALLS"], "a") as log:
        log.write(json.dumps(record) + "\n")
    return 0


def pip_installs(folder: Path) -> list[dict]:
    """What the fake python's pip installed in folder's script machine, one record per install."""
    path = folder / "pip_installs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def script_machine(folder: Path, gpu: bool = True) -> dict[str, str]:
    """A fake python3 and an nvidia-smi that lists a GPU (or none), in folder; the environment that uses them."""
    bin_dir = executable(folder / "bin" / "python3", FAKE_PYTHON).parent
    nvidia_smi(bin_dir, "NVIDIA H200" if gpu else None)
    (log := folder / "python.log").touch()
    executed = sorted(ROOT.glob("docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb"))  # a real run's notebook
    return {
        **clean_environment(),
        "PYTHON": str(bin_dir / "python3"),
        "FAKE_LOG": str(log),
        "HOME": str(folder),
        "FAKE_REAL_PYTHON": sys.executable,
        "FAKE_PIP": __file__,
        "FAKE_EXECUTED": str(executed[-1]),
        "FAKE_INSTALLS": str(folder / "pip_installs.jsonl"),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }


def files_of(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """{relative path: content} of the files under folder, but those whose path starts with one of skip, and Python's
    own bytecode caches: a refused script's import writes __pycache__ unless PYTHONDONTWRITEBYTECODE is set, and that
    is Python's doing, not a change the script made (CI runs the suite both ways)."""
    found = (path for path in folder.rglob("*") if path.is_file() and "__pycache__" not in path.parts)
    files = {str(path.relative_to(folder)): path for path in found}
    return {name: path.read_bytes() for name, path in files.items() if not name.startswith(skip)}


def fresh_clone(folder: Path) -> Path:
    """A copy of the files the shell scripts need, as a fresh clone has them (no wheelhouse/): a script that writes
    where it must not harms the copy, never the developer's tree."""
    names = "requirements-harness.txt requirements-dev.txt requirements.txt constraints-ci.txt"
    for name in [*names.split(), "nsight_python_t4_tutorial.ipynb"]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, folder / name)
    # whole, as a clone has them: a script may import any of its neighbours, and the folders beside its own
    for code in ("scripts", "tools", "plumbing"):
        shutil.copytree(ROOT / code, folder / code, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def run_script(script, tmp_path, *args, gpu=True, cwd=None, **fake):
    """Run a shell script with the fake python3: (exit status, what it printed, what python was asked, by line)."""
    env = {**script_machine(tmp_path, gpu), **{key: str(value) for key, value in fake.items()}}
    done = subprocess.run(["bash", ROOT / script, *args], cwd=cwd or tmp_path, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr, (tmp_path / "python.log").read_text().splitlines()


# ---------------------------------------------------------------- other Pythons and commands a test needs
def real_python(path: Path, without_pip: bool = False) -> Path:
    """The suite's own Python under another name; without_pip: one whose `-m pip` fails, as a venv without pip."""
    no_pip = '[ "$2" = pip ] && exit 1\n' if without_pip else ""
    return executable(path, f'#!/bin/sh\n{no_pip}exec {sys.executable} "$@"\n')


def failing_command(path: Path, says: str = "", status: int = 1) -> Path:
    """A command that prints `says` (if anything) on stderr and exits with `status`."""
    return executable(path, f"#!/bin/sh\n{f'echo {shlex.quote(says)} >&2' if says else ''}\nexit {status}\n")


def hanging_command(path: Path) -> Path:
    return executable(path, "#!/bin/sh\nsleep 600\n")


def call_logger(path: Path) -> Path:
    """A command that appends its name, arguments and the settings CI steers (actionlint, PYTHON, the venv,
    PYTHONDONTWRITEBYTECODE) to $CALLS."""
    said = '$(basename "$0") $* actionlint=${NSPY_TUTORIAL_REQUIRE_ACTIONLINT:-} python=${PYTHON:-}'
    said += " venv=${NSPY_TUTORIAL_TEST_VENV:-} bytecode=${PYTHONDONTWRITEBYTECODE-unset}"
    return executable(path, f'#!/bin/sh\necho "{said}" >> "$CALLS"\n')


if __name__ == "__main__":  # the fake python's pip: python fakes.py PYTHON PIP-ARGUMENTS...
    sys.exit(script_pip(sys.argv[1], sys.argv[2:]))
