"""Simulated machines for section 1: small executables on PATH instead of a GPU, apt and PyPI.

A FakeMachine is a folder holding:
  bin/           nvidia-smi, apt-get and dpkg (one Python script, dispatching on its name)
  ncu-<v>/ncu    Nsight Compute launchers that print `Version <v>.0` and name an injection folder
  opt/           where the fake apt-get "installs" nsight-compute-<v> (a launcher plus a per-platform copy)
  dpkg/          the fake dpkg database: <package>.list, what `dpkg -L` prints
  py/pip/        a `python -m pip` that records its arguments and "installs" name==version by writing
                 dist-info metadata into --target (and libcupti.so.13 for nvidia-cuda-cupti), offline
                 only from wheels present in --find-links
  site/          dist-info metadata that shadows the test venv's, to look like Colab's packages
  calls.jsonl    every call of apt-get, dpkg and pip, with DEBIAN_FRONTEND
Nothing here imitates nsight, torch or CUDA: the notebook's cells run against the real nsight-python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

# Colab's GPU image (environments.md): packages whose versions differ from the test venv's.
COLAB_SITE = {"cuda-core": "0.3.2", "cuda-bindings": "12.9.7", "numba-cuda": "0.22.2"}
NVIDIA_SMI_T4 = "Tesla T4, 7.5"

TOOL = textwrap.dedent(
    """\
    #!{python}
    import json, os, subprocess, sys, time
    from pathlib import Path

    ROOT = Path({root!r})
    machine = json.loads((ROOT / "machine.json").read_text())
    tool, args = Path(sys.argv[0]).name, sys.argv[1:]
    with open(ROOT / "calls.jsonl", "a") as log:
        call = {{"tool": tool, "argv": args, "DEBIAN_FRONTEND": os.environ.get("DEBIAN_FRONTEND")}}
        log.write(json.dumps(call) + "\\n")

    def launcher(folder, version):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ncu").write_text(machine["ncu_script"].replace("@VERSION@", version).replace("@DIR@", str(folder)))
        (folder / "ncu").chmod(0o755)
        return folder / "ncu"

    if tool == "nvidia-smi":
        if not machine["gpu"]:
            print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
            sys.exit(9)
        if "--query-gpu=driver_version" in args:
            print("580.82.07")
        elif args == ["-L"]:
            print("GPU 0: " + machine["gpu"].split(",")[0] + " (UUID: GPU-0000)")
        else:
            print(machine["gpu"])
    elif tool == "dpkg":
        listing = ROOT / "dpkg" / (args[-1] + ".list")
        if args[0] != "-L" or not listing.exists():
            print(f"dpkg-query: package '{{args[-1]}}' is not installed", file=sys.stderr)
            sys.exit(1)
        print(listing.read_text(), end="")
    elif tool == "apt-get":
        (ROOT / "apt.pid").write_text(str(os.getpid()))
        mode = machine["apt"]
        if mode == "hangs" or (mode == "install_hangs" and args[0] == "install"):
            helper = subprocess.Popen(["sleep", "3600"])  # real apt-get hangs in a helper (its http method)
            (ROOT / "apt-helper.pid").write_text(str(helper.pid))
            time.sleep(3600)
        if mode == "unreachable":
            print("E: Failed to fetch https://developer.download.nvidia.com/compute/cuda/repos/ "
                  "Could not resolve host: developer.download.nvidia.com")
            sys.exit(100)
        if args[0] == "update":
            sys.exit(0)
        package = args[-1]
        version = package.rsplit("-", 1)[-1]
        if package.startswith("nsight-compute-") and version in machine["apt_versions"]:
            home = ROOT / "opt" / "nvidia" / "nsight-compute" / version
            files = [launcher(home, version), launcher(home / "target" / "linux-desktop-glibc_2_11_3-x64", version)]
            (ROOT / "dpkg").mkdir(exist_ok=True)
            (ROOT / "dpkg" / (package + ".list")).write_text("\\n".join([str(home), *map(str, files)]) + "\\n")
            sys.exit(0)
        print(f"E: Unable to locate package {{package}}")
        sys.exit(100)
    """
)

NCU = textwrap.dedent(
    """\
    #!/bin/sh
    case "$1" in
      --version) printf 'NVIDIA (R) Nsight Compute Command Line Profiler\\n'
                 printf 'Version @VERSION@.0 (build 36000000) (public-release)\\n' ;;
      --list-injection-path-64) @INJECTION@ ;;
      *) echo "==ERROR== this fake ncu cannot profile: there is no GPU here" >&2; exit 1 ;;
    esac
    """
)

PIP = textwrap.dedent(
    """\
    import json, re, sys
    from pathlib import Path

    ROOT = Path({root!r})
    args = sys.argv[1:]
    with open(ROOT / "calls.jsonl", "a") as log:
        log.write(json.dumps({{"tool": "pip", "argv": args}}) + "\\n")
    machine = json.loads((ROOT / "machine.json").read_text())
    if machine["pip_fails"]:
        print("ERROR: Could not find a version that satisfies the requirement (network unreachable)")
        sys.exit(1)
    target = Path(args[args.index("--target") + 1]) if "--target" in args else None
    links = Path(args[args.index("--find-links") + 1]) if "--find-links" in args else None
    pins = [arg.split("==") for arg in args if re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9.+]*", arg)]
    for name, version in pins:
        stem = re.sub(r"[-_.]+", "_", name).lower() + "-" + version
        if links is not None and not list(links.glob(stem + "-*.whl")):
            print(f"ERROR: No matching distribution found for {{name}}=={{version}} in {{links}}")
            sys.exit(1)
    for wheel in [arg for arg in args if arg.endswith(".whl")]:  # wheel files named on the command line
        if not Path(wheel).is_file():
            print(f"ERROR: {{wheel}} does not exist")
            sys.exit(1)
        name, version = Path(wheel).name.split("-")[:2]
        pins.append([name.replace("_", "-"), version])
    if "--no-index" in args and "--no-deps" not in args:
        # These wheels carry no metadata, so dependencies cannot be resolved offline; on the GPU runner,
        # pip without --no-deps could not resolve cupti-python's cuda-bindings from the wheelhouse either.
        print("ERROR: offline, this pip cannot resolve the dependencies; install with --no-deps")
        sys.exit(1)
    if target is None:
        print("this fake pip only installs with --target: it refuses to change the Python's own packages")
        sys.exit(3)
    for name, version in pins:
        info = target / (re.sub(r"[-_.]+", "_", name) + "-" + version + ".dist-info")
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\\nName: {{name}}\\nVersion: {{version}}\\n")
        if name == "nvidia-cuda-cupti":
            (target / "nvidia" / "cu13" / "lib").mkdir(parents=True, exist_ok=True)
            (target / "nvidia" / "cu13" / "lib" / "libcupti.so.13").write_text("not a real library")
    """
)

FAKE_INJECTION_C = "int nvInjBeginProfiling(void) { return 0; }\nint nvInjEndProfiling(void) { return 0; }\n"


def build_fake_injection_library(folder: Path) -> Path | None:
    """A libcuda-injection.so that exports the two symbols nsight looks up, or None without a C compiler.

    With it, nsight's own load of Nsight Compute succeeds on a CPU machine, so a test can go on to the
    next step that really needs a GPU (import torch, then profiling).
    """
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    source, library = folder / "injection.c", folder / "libcuda-injection.so"
    source.write_text(FAKE_INJECTION_C)
    done = subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], capture_output=True)
    return library if done.returncode == 0 else None


@dataclass
class FakeMachine:
    root: Path
    gpu: str | None = NVIDIA_SMI_T4
    path_ncus: list[str] = field(default_factory=lambda: ["2025.1.1"])  # ncu versions on PATH, in PATH order
    ncu_path_version: str | None = None  # an ncu in a folder that NCU_PATH names (not on PATH)
    apt: str = "works"  # works | unreachable | hangs | install_hangs
    apt_versions: tuple[str, ...] = ("2026.3.1", "2026.2.1", "2025.1.1")
    site: dict[str, str] = field(default_factory=lambda: dict(COLAB_SITE))
    pip_fails: bool = False
    injection: str = "missing"  # missing | loadable | hangs: what `ncu --list-injection-path-64` leads to
    env: dict[str, str] = field(default_factory=dict)

    def build(self) -> dict[str, str]:
        """Create the machine; return the environment a kernel on it runs with."""
        for folder in ("bin", "py/pip", "site", "home", "cwd"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / "calls.jsonl").write_text("")
        (self.root / "machine.json").write_text(
            json.dumps(
                {
                    "gpu": self.gpu,
                    "apt": self.apt,
                    "apt_versions": list(self.apt_versions),
                    "pip_fails": self.pip_fails,
                    "ncu_script": self._ncu_script(),
                }
            )  # fmt: skip
        )
        tool = TOOL.format(python=sys.executable, root=str(self.root))
        for name in ("nvidia-smi", "apt-get", "dpkg"):
            (self.root / "bin" / name).write_text(tool)
            (self.root / "bin" / name).chmod(0o755)
        (self.root / "py" / "pip" / "__init__.py").write_text("")
        (self.root / "py" / "pip" / "__main__.py").write_text(PIP.format(root=str(self.root)))
        for name, version in self.site.items():
            info = self.root / "site" / f"{name.replace('-', '_')}-{version}.dist-info"
            info.mkdir(parents=True, exist_ok=True)
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        path_folders = [self.root / "bin"] + [self.ncu_folder(version) for version in self.path_ncus]
        env = {
            "PATH": os.pathsep.join([*map(str, path_folders), "/usr/bin", "/bin"]),
            "PYTHONPATH": os.pathsep.join([str(self.root / "py"), str(self.root / "site")]),
            "HOME": str(self.root / "home"),
            "NSPY_TUTORIAL_OUT": str(self.root / "out"),
            "MPLBACKEND": "Agg",
        }
        if self.ncu_path_version:
            env["NCU_PATH"] = str(self.ncu_folder(self.ncu_path_version, name="given"))
        self._env = {**env, **self.env}
        return self._env

    def build_env(self) -> dict[str, str]:
        """The environment of a new kernel on the same machine (a runtime restart): nothing is rebuilt."""
        return dict(self._env)

    def _ncu_script(self) -> str:
        if self.injection == "loadable" and not (self.root / "injection" / "libcuda-injection.so").exists():
            if build_fake_injection_library(self.root / "injection") is None:
                raise RuntimeError("no C compiler to build the fake injection library")
        injection = {
            "missing": 'echo "@DIR@/injection"',
            "loadable": f'echo "{self.root / "injection"}"',
            "hangs": "sleep 3600",
        }[self.injection]
        return NCU.replace("@INJECTION@", injection)

    def ncu_folder(self, version: str, name: str = "path") -> Path:
        folder = self.root / f"{name}-ncu-{version}"
        folder.mkdir(parents=True, exist_ok=True)
        script = self._ncu_script().replace("@VERSION@", version).replace("@DIR@", str(folder))
        (folder / "ncu").write_text(script)
        (folder / "ncu").chmod(0o755)
        return folder

    def calls(self, tool: str) -> list[dict]:
        lines = (self.root / "calls.jsonl").read_text().splitlines()
        return [call for call in map(json.loads, lines) if call["tool"] == tool]

    def apt_installs(self) -> list[str]:
        return [call["argv"][-1] for call in self.calls("apt-get") if call["argv"][0] == "install"]


def clean_environment() -> dict[str, str]:
    """The test process's environment without the settings a simulated machine decides for itself."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("NSPY_", "NCU_", "NVTX_", "NV_COMPUTE_"))
        and key not in ("PYTHONPATH", "HOME", "DEBIAN_FRONTEND")
    }


def make_wheelhouse(folder: Path, pins: dict[str, str], cupti_pins: dict[str, str]) -> Path:
    """Empty files named like the wheels, laid out as scripts/make_wheelhouse.py lays them out."""
    for directory, wanted in ((folder, pins), (folder / "cupti", cupti_pins)):
        directory.mkdir(parents=True, exist_ok=True)
        for name, version in wanted.items():
            (directory / f"{name.replace('-', '_').lower()}-{version}-py3-none-any.whl").write_text("")
    return folder


# ---------------------------------------------------------------- the shell scripts' machine
FAKE_PYTHON = """#!/bin/sh
# A python3 for the scripts' tests: records what it is asked to do (FAKE_LOG); FAKE_* variables set its answers.
# Its version is FAKE_PYTHON_VERSION; the code the scripts give it with -c runs in the real Python under that
# version, except the harness check, which FAKE_HARNESS_MISSING answers. Its pip is this file's script_pip.
# `pytest` leaves FAKE_EXECUTED as the executed notebook; the project's Python scripts run for real, with the test
# suite's Python (it has the harness).
echo "$*" >> "$FAKE_LOG"
case "$1" in
  -c) case "$2" in
        *version_info*) exec "$FAKE_REAL_PYTHON" -c "import sys
sys.version_info = tuple(map(int, '${FAKE_PYTHON_VERSION:-3.12.3}'.split('.'))) + ('final', 0)
$2" ;;
        *nbmake*) exit "${FAKE_HARNESS_MISSING:-0}" ;;  # run_headless's check for the harness
        *) shift; exec "$FAKE_REAL_PYTHON" -c "$@" ;;  # with the arguments after the code, as python has them
      esac ;;
  *scripts/make_wheelhouse.py) exit 0 ;;  # it downloads from PyPI: only recorded
  *.py) exec "$FAKE_REAL_PYTHON" "$@" ;;
esac
case "$2" in
  venv) mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit ;;  # failing where python -m venv would
  pip) python="$0"; shift 2; exec "$FAKE_REAL_PYTHON" "$FAKE_PIP" "$python" "$@" ;;
  pytest) [ -n "${NSPY_TUTORIAL_OUT:-}" ] && cp "$FAKE_EXECUTED" "$NSPY_TUTORIAL_OUT/nsight_python_t4_tutorial.ipynb" \
            && cp "$(dirname "$FAKE_EXECUTED")/summary.json" "$NSPY_TUTORIAL_OUT/summary.json"
          echo "fake pytest"; exit "${FAKE_PYTEST_EXIT:-0}" ;;
esac
exit 0
"""
SCRIPT_PYTHON_PACKAGES = {"torch": "2.11.0"}  # what the fake python has before anything is installed


def requirement_pins(path: Path, constraints: dict[str, str | None] | None = None) -> dict[str, str | None]:
    """name -> version (None when unpinned) of a requirements file, following -r; its -c files go to constraints."""
    pins: dict[str, str | None] = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith(("-r ", "-c ")):
            included = Path(path).parent / line[3:].strip()
            if line.startswith("-r "):
                pins.update(requirement_pins(included, constraints))
            elif constraints is not None:
                constraints.update(requirement_pins(included, constraints))
        elif line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip() or None
    return pins


def script_pip(python: str, args: list[str]) -> int:
    """The fake python's `-m pip`: freeze lists its packages; install checks that every requirement can be had
    (offline: a wheel of that name and version in --find-links) and appends what it installed, from where and
    into which Python, to FAKE_INSTALLS. It installs nothing."""
    if args[:1] == ["freeze"]:
        print("\n".join(f"{name}=={version}" for name, version in SCRIPT_PYTHON_PACKAGES.items()))
        return 0
    record = {"python": python, "index": "PyPI", "find_links": None, "requirements": {}, "constraints": {}}
    words = iter([part for word in args[1:] for part in (word.split("=", 1) if word.startswith("--") else [word])])
    for word in words:  # pip's spellings of the same request are the same request: --find-links=X, -f X
        if word in ("-r", "--requirement"):
            record["requirements"].update(requirement_pins(Path(next(words)), record["constraints"]))
        elif word in ("-c", "--constraint"):
            record["constraints"].update(requirement_pins(Path(next(words)), record["constraints"]))
        elif word in ("-f", "--find-links"):
            record["find_links"] = next(words)
        elif word in ("-i", "--index-url"):
            record["index"] = next(words)
        elif word == "--no-index":
            record["index"] = None
        elif not word.startswith("-"):
            name, _, version = word.partition("==")
            record["requirements"][name.lower()] = version or None
    if os.environ.get("FAKE_PIP_FAILS"):
        print("ERROR: Could not install: network unreachable", file=sys.stderr)
        return 1
    for name, version in record["requirements"].items():
        wheel = f"{name.replace('-', '_')}-{version or ''}*.whl"
        if record["index"] is None and not (record["find_links"] and list(Path(record["find_links"]).glob(wheel))):
            print(
                f"ERROR: No matching distribution found for {name}=={version} (no index, no {wheel})", file=sys.stderr
            )
            return 1
    with open(os.environ["FAKE_INSTALLS"], "a") as log:
        log.write(json.dumps(record) + "\n")
    return 0


def pip_installs(folder: Path) -> list[dict]:
    """What the fake python's pip installed in folder's script machine: one record per pip install."""
    path = folder / "pip_installs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


NVIDIA_SMI_LISTING = {
    True: "#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-00000000)'\n",
    False: "#!/bin/sh\necho 'No devices were found'\nexit 6\n",
}


def script_machine(folder: Path, gpu: bool = True) -> dict[str, str]:
    """A fake python3 and an nvidia-smi that lists a GPU (or none), in folder; the environment that uses them."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("python3", FAKE_PYTHON), ("nvidia-smi", NVIDIA_SMI_LISTING[gpu])):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = folder / "python.log"
    log.touch()
    env = clean_environment()
    from support import ROOT

    executed = sorted(ROOT.glob("docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb"))  # a real run's notebook
    env.update(
        PYTHON=str(bin_dir / "python3"),
        FAKE_LOG=str(log),
        FAKE_REAL_PYTHON=sys.executable,
        FAKE_PIP=__file__,
        FAKE_INSTALLS=str(folder / "pip_installs.jsonl"),
        FAKE_EXECUTED=str(executed[-1]),
        HOME=str(folder),
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    )
    return env


def invoked(asked: list[str], what: str) -> list[str]:
    """The calls of the fake python (run_script's third result) that start with what, e.g. "-m pip install"."""
    return [line for line in asked if line.startswith(what)]


def fresh_clone(folder: Path) -> Path:
    """The files the shell scripts need, as a fresh clone has them (and nothing a user made, like wheelhouse/).

    A copy, so that a script that writes where it must not harms the copy, never the developer's tree."""
    from support import ROOT

    for name in (
        "scripts/run_headless",
        "scripts/run_tests",
        "scripts/setup_gpu_runner",
        "scripts/settings.bash",  # the checks the three share
        "scripts/render_recorded.py",  # and what it imports: the page of the executed notebook
        "scripts/recordings.py",
        "scripts/record_ncu.py",
        "scripts/ncu_launch.py",
        "scripts/notebook_format.py",
        "requirements-harness.txt",
        "requirements-dev.txt",
        "requirements.txt",
        "constraints-ci.txt",
        "nsight_python_t4_tutorial.ipynb",
    ):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, folder / name)
    shutil.copytree(ROOT / "plumbing", folder / "plumbing", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def run_script(script, tmp_path, *args, gpu=True, cwd=None, **fake):
    """Run one of our shell scripts with the fake python3 (and a GPU unless gpu=False).

    Returns (exit status, what it printed, what python was asked: one line per call).
    """
    from support import ROOT

    env = script_machine(tmp_path, gpu)
    env.update({key: str(value) for key, value in fake.items()})
    done = subprocess.run(
        ["bash", str(ROOT / script), *args], cwd=cwd or tmp_path, env=env, capture_output=True, text=True
    )
    return done.returncode, done.stdout + done.stderr, (tmp_path / "python.log").read_text().splitlines()


if __name__ == "__main__":  # the fake python's pip: python fake_env.py PYTHON PIP-ARGUMENTS...
    sys.exit(script_pip(sys.argv[1], sys.argv[2:]))
