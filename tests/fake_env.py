"""Simulated machines. FakeMachine (section 1): bin/ nvidia-smi, apt-get and dpkg (one script), <name>-ncu-<v>/ncu,
py/pip a pip that only writes name==version metadata into --target (offline: only what --find-links holds), site/
Colab's packages; calls.jsonl logs each call. Nothing imitates nsight, torch or CUDA. Below: the shell scripts'."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLAB_SITE = {"cuda-core": "0.3.2", "cuda-bindings": "12.9.7", "numba-cuda": "0.22.2"}  # environments.md

TOOL = """#!{python}
import json, os, subprocess, sys, time
from pathlib import Path

ROOT = Path({root!r})
machine = json.loads((ROOT / "machine.json").read_text())
tool, args = Path(sys.argv[0]).name, sys.argv[1:]
with open(ROOT / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"tool": tool, "argv": args, "DEBIAN_FRONTEND": os.environ.get("DEBIAN_FRONTEND")}}) + "\\n")
if tool == "nvidia-smi":
    if not machine["gpu"]:
        sys.exit("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    print("580.82.07" if "--query-gpu=driver_version" in args else machine["gpu"])
elif tool == "dpkg":
    listing = ROOT / "dpkg" / (args[-1] + ".list")
    if not listing.exists():
        sys.exit(f"dpkg-query: package '{{args[-1]}}' is not installed")
    print(listing.read_text(), end="")
elif tool == "apt-get":
    (ROOT / "apt.pid").write_text(str(os.getpid()))
    if machine["apt"] == "hangs":  # real apt-get hangs in a helper (its http method)
        (ROOT / "apt-helper.pid").write_text(str(subprocess.Popen(["sleep", "3600"]).pid))
        time.sleep(3600)
    if machine["apt"] == "unreachable":
        print("E: Failed to fetch https://developer.download.nvidia.com/ Could not resolve host")
        sys.exit(100)
    if args[0] == "install":
        if "-y" not in args:
            sys.exit("Do you want to continue? [Y/n] Abort.")  # without a terminal, apt-get aborts
        version = args[-1].rsplit("-", 1)[-1]
        home = ROOT / "opt/nvidia/nsight-compute" / version
        files = [home / "ncu", home / "target/linux-desktop-glibc_2_11_3-x64/ncu"]  # dpkg -L lists both
        for ncu in files:
            ncu.parent.mkdir(parents=True, exist_ok=True)
            ncu.write_text(machine["ncu_script"].replace("@VERSION@", version).replace("@DIR@", str(ncu.parent)))
            ncu.chmod(0o755)
        (ROOT / "dpkg").mkdir(exist_ok=True)
        (ROOT / "dpkg" / (args[-1] + ".list")).write_text("\\n".join(map(str, [home, *files])) + "\\n")
"""
NCU = """#!/bin/sh
case "$1" in
  --version) printf 'NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion @VERSION@.0 (build 36000000)\\n' ;;
  --list-injection-path-64) echo "@INJECTION@" ;;
  *) echo "==ERROR== this fake ncu cannot profile: there is no GPU here" >&2; exit 1 ;;
esac
"""
PIP = """import json, re, sys
from pathlib import Path

ROOT, args = Path({root!r}), sys.argv[1:]
with open(ROOT / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"tool": "pip", "argv": args}}) + "\\n")
target, links = (Path(args[args.index(o) + 1]) if o in args else None for o in ("--target", "--find-links"))
pins = [arg.split("==") for arg in args if "==" in arg]
for name, version in pins:
    if links and not list(links.glob(re.sub(r"[-_.]+", "_", name).lower() + f"-{{version}}-*.whl")):
        sys.exit(f"ERROR: No matching distribution found for {{name}}=={{version}} in {{links}}")
for wheel in [arg for arg in args if arg.endswith(".whl")]:
    if not Path(wheel).is_file():
        sys.exit(f"ERROR: {{wheel}} does not exist")
    pins.append(Path(wheel).name.split("-")[:2])
if target is None:
    sys.exit("this fake pip installs only with --target: it never changes the Python's own packages")
for name, version in pins:
    info = target / (re.sub(r"[-_.]+", "_", name) + f"-{{version}}.dist-info")
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\\nName: {{name}}\\nVersion: {{version}}\\n")
    if name.replace("_", "-") == "nvidia-cuda-cupti":
        (target / "nvidia/cu13/lib").mkdir(parents=True, exist_ok=True)
        (target / "nvidia/cu13/lib/libcupti.so.13").write_text("not a real library")
"""


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def build_fake_injection_library(folder: Path) -> Path | None:
    """A library with the two symbols nsight looks up in Nsight Compute's injection library (None without cc)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    source, library = folder / "injection.c", folder / "libcuda-injection.so"
    source.write_text("int nvInjBeginProfiling(void) { return 0; }\nint nvInjEndProfiling(void) { return 0; }\n")
    done = subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], capture_output=True)
    return library if done.returncode == 0 else None


@dataclass
class FakeMachine:
    root: Path
    gpu: str | None = "Tesla T4, 7.5"  # what nvidia-smi answers for name,compute_cap
    path_ncus: list[str] = field(default_factory=lambda: ["2025.1.1"])  # ncu versions on PATH, in PATH order
    apt: str = "works"  # works | unreachable | hangs
    site: dict[str, str] = field(default_factory=lambda: dict(COLAB_SITE))
    injection: str = "missing"  # missing | loadable: whether the injection folder ncu names has the library
    env: dict[str, str] = field(default_factory=dict)

    def build(self) -> dict[str, str]:
        """Make the machine; the environment a kernel on it runs with."""
        for folder in ("bin", "py/pip", "home", "cwd"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / "calls.jsonl").write_text("")
        self.save()
        for name in ("nvidia-smi", "apt-get", "dpkg"):
            executable(self.root / "bin" / name, TOOL.format(python=sys.executable, root=str(self.root)))
        (self.root / "py/pip/__init__.py").write_text("")
        (self.root / "py/pip/__main__.py").write_text(PIP.format(root=str(self.root)))
        for name, version in self.site.items():
            info = self.root / "site" / f"{name.replace('-', '_')}-{version}.dist-info"
            info.mkdir(parents=True, exist_ok=True)
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        path = [self.root / "bin", *map(self.ncu_folder, self.path_ncus), "/usr/bin", "/bin"]
        env = {"PATH": os.pathsep.join(map(str, path)), "HOME": str(self.root / "home"), "MPLBACKEND": "Agg",
               "PYTHONPATH": f"{self.root / 'py'}{os.pathsep}{self.root / 'site'}",
               "NSPY_TUTORIAL_OUT": str(self.root / "out")}  # fmt: skip
        return {**env, **self.env}

    def save(self) -> None:
        """Write what the tools answer (again after a test changes gpu or apt)."""
        injection = {"missing": "@DIR@/injection", "loadable": str(self.root / "injection")}[self.injection]
        built = (self.root / "injection" / "libcuda-injection.so").exists()
        if self.injection == "loadable" and not built and build_fake_injection_library(self.root / "injection") is None:
            raise RuntimeError("no C compiler to build the fake injection library")
        script = NCU.replace("@INJECTION@", injection)
        (self.root / "machine.json").write_text(json.dumps({"gpu": self.gpu, "apt": self.apt, "ncu_script": script}))

    def ncu_folder(self, version: str, name: str = "path") -> Path:
        folder = self.root / f"{name}-ncu-{version}"
        script = json.loads((self.root / "machine.json").read_text())["ncu_script"]
        return executable(folder / "ncu", script.replace("@VERSION@", version).replace("@DIR@", str(folder))).parent

    def calls(self, tool: str | None = None) -> list[dict]:
        lines = (self.root / "calls.jsonl").read_text().splitlines()
        return [call for call in map(json.loads, lines) if tool in (None, call["tool"])]

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
  pip) python="$0"; shift 2; exec "$FAKE_REAL_PYTHON" "$FAKE_PIP" "$python" "$@" ;;
  pytest) [ -n "${NSPY_TUTORIAL_OUT:-}" ] && cp "$FAKE_EXECUTED" "$NSPY_TUTORIAL_OUT/nsight_python_t4_tutorial.ipynb" \
            && cp "$(dirname "$FAKE_EXECUTED")/summary.json" "$NSPY_TUTORIAL_OUT/summary.json"
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
    given = {option: args[args.index(option) + 1] for option in ("-r", "-c", "--find-links") if option in args}
    record = {"python": python, "index": None if "--no-index" in args else "PyPI", "constraints": {},
              "find_links": given.get("--find-links")}  # fmt: skip
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
    bin_dir = folder / "bin"
    listing = "echo 'GPU 0: NVIDIA H200 (UUID: GPU-00000000)'" if gpu else "echo 'No devices were found'; exit 6"
    for name, text in (("python3", FAKE_PYTHON), ("nvidia-smi", f"#!/bin/sh\n{listing}\n")):
        executable(bin_dir / name, text)
    (log := folder / "python.log").touch()
    executed = sorted(ROOT.glob("docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb"))  # a real run's notebook
    return {**clean_environment(), "PYTHON": str(bin_dir / "python3"), "FAKE_LOG": str(log), "HOME": str(folder),
            "FAKE_REAL_PYTHON": sys.executable, "FAKE_PIP": __file__, "FAKE_EXECUTED": str(executed[-1]),
            "FAKE_INSTALLS": str(folder / "pip_installs.jsonl"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}  # fmt: skip


def files_of(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """{relative path: content} of the files under folder, but those whose path starts with one of skip."""
    files = {str(path.relative_to(folder)): path for path in folder.rglob("*") if path.is_file()}
    return {name: path.read_bytes() for name, path in files.items() if not name.startswith(skip)}


def fresh_clone(folder: Path) -> Path:
    """A copy of the files the shell scripts need, as a fresh clone has them (no wheelhouse/): a script that writes
    where it must not harms the copy, never the developer's tree."""
    names = "requirements-harness.txt requirements-dev.txt requirements.txt constraints-ci.txt"
    for name in [*names.split(), "nsight_python_t4_tutorial.ipynb"]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, folder / name)
    for code in ("scripts", "plumbing"):  # whole, as a clone has them: a script may import any of its neighbours
        shutil.copytree(ROOT / code, folder / code, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def run_script(script, tmp_path, *args, gpu=True, cwd=None, **fake):
    """Run a shell script with the fake python3: (exit status, what it printed, what python was asked, by line)."""
    env = {**script_machine(tmp_path, gpu), **{key: str(value) for key, value in fake.items()}}
    done = subprocess.run(["bash", ROOT / script, *args], cwd=cwd or tmp_path, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr, (tmp_path / "python.log").read_text().splitlines()


if __name__ == "__main__":  # the fake python's pip: python fake_env.py PYTHON PIP-ARGUMENTS...
    sys.exit(script_pip(sys.argv[1], sys.argv[2:]))
