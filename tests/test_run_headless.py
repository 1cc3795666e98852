"""scripts/run_headless on a fake python3 and nvidia-smi (tests/fakes.py): inputs checked at their edges before
anything is done, and the README's first command on a fresh clone."""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import fakes
import pytest
from fakes import files_of, fresh_clone, make_wheelhouse, pip_installs, requirement_pins, run_script, script_machine
from support import NOTEBOOK, ROOT, WITHOUT_MODULES

from plumbing.harness import OUTPUT_FOLDER

HEADLESS = "scripts/run_headless"
HARNESS = requirement_pins(ROOT / "requirements-harness.txt")
CHANGES = ("-m pip install", "-m ipykernel install", "-m pytest")  # what a refused run must not ask python to do
IN_ROOT = ("pytest.log", "run_info.json", NOTEBOOK.name)  # where an empty output folder would have put them
MACHINE_OWN = ("bin/", "python.log")  # the fake machine's own files, left out of files_of


def git_clone(folder: Path) -> Path:
    """A fresh clone that git tracks, as a user's: its top, .git and folders of tracked files are no output folder."""
    subprocess.run(["git", "init", "-q", str(fresh_clone(folder))], check=True)
    subprocess.run(["git", "-C", str(folder), "add", "scripts", "plumbing"], check=True)
    return folder


REFUSED = [  # (arguments, settings, what the message names); {tmp}: the test's folder, {clone}: the clone
    ([], {"gpu": False}, "no NVIDIA GPU"),
    *(  # cannot be made, no such user, the clone, a folder above it
        ([], {"NSPY_TUTORIAL_OUT": value}, f"NSPY_TUTORIAL_OUT={value}")
        for value in ("/proc/nspy_no_such/x", "~nspy_no_such_user/x", "{clone}", "..")
    ),
    *(  # cannot be made; the clone, a link to the clone
        ([value], {}, f"output folder argument ({value})") for value in ("/proc/nspy_no_such/x", ".", "{tmp}/link")
    ),
    (["{clone}/plumbing/new"], {}, "a folder of its tracked files (copy a run there after it ran)"),
    (["--out"], {}, "--out"),
    (["a", "b"], {}, "a b"),
    (["--prepare-only", "EXTRA"], {}, "EXTRA"),
    *(
        ([], {"NSPY_TUTORIAL_CELL_TIMEOUT": value}, f"NSPY_TUTORIAL_CELL_TIMEOUT={value}")
        for value in ("0", "86401", "abc", "-5", "1e3", "99999999999999999999")
    ),
    *(
        ([], {"NSPY_TUTORIAL_COMMIT": value}, "NSPY_TUTORIAL_COMMIT=")
        for value in ("abcdef", "a" * 41, "ABCDEF0", "main", 'abc"def0', "abcdef0\\", "abcdef0\nabcdef0")
    ),
    *(([], {"NSPY_TUTORIAL_WHEELHOUSE": v}, f"NSPY_TUTORIAL_WHEELHOUSE={v}") for v in ("{tmp}/none", "{tmp}/empty")),
    ([""], {}, "the output folder argument is empty"),  # not dropped for the default
    (["{tmp}/mine"], {}, "holds files this project did not make"),  # the user's, holding a notebook of our name
    ([], {"NSPY_TUTORIAL_OUT": "~"}, "is /, HOME or a folder above HOME"),  # HOME is {tmp} here
    ([], {"NSPY_TUTORIAL_OUT": "~/o", "HOME": ""}, "HOME empty or unset"),  # not /o at the root
    ([" "], {}, "' ' names no folder (a blank at either end"),  # not a folder named ' ' in the current folder
    ([], {"FAKE_TORCH_CUDA": "None"}, "has torch 2.11.0, a build without CUDA"),
    ([], {"FAKE_TORCH_CUDA": "missing"}, "cannot import torch (ModuleNotFoundError: No module named 'torch')"),
    ([], {"NSPY_TUTORIAL_WHEELHOUSE": "{tmp}/wh?"}, "holds *, ? or [, which pip"),  # {tmp}/wh1 holds a wheel
]


@pytest.mark.parametrize(("args", "settings", "named"), REFUSED)
def test_run_headless_refuses_a_bad_input_naming_it_and_changes_nothing(tmp_path, args, settings, named):
    clone = git_clone(tmp_path / "clone")
    (tmp_path / "mine").mkdir()
    shutil.copy(NOTEBOOK, tmp_path / "mine")
    make_wheelhouse(tmp_path / "wh1", {"nbmake": "1.0"}, {})
    (tmp_path / "empty" / "cupti").mkdir(parents=True)  # a wheelhouse without a wheel
    (tmp_path / "link").symlink_to(clone)
    fill = {"tmp": tmp_path, "clone": clone}
    args = [arg.format(**fill) for arg in args]
    settings = {key: value.format(**fill) if isinstance(value, str) else value for key, value in settings.items()}
    before, in_root = files_of(tmp_path, MACHINE_OWN), [name for name in IN_ROOT if (Path("/") / name).exists()]
    status, output, asked = run_script(
        str(clone / HEADLESS), tmp_path, *args, cwd=clone, FAKE_HARNESS_MISSING=1, **settings
    )
    assert status == 2 and named.format(**fill) in output, f"refuse (exit 2) naming {named!r}:\n{output}"
    assert not [line for line in asked if line.startswith(CHANGES)], f"refused, yet python was asked to {asked}"
    assert "WHEELHOUSE" not in str(settings) or "scripts/make_wheelhouse.py --dest" in output, "say how to make one"
    assert files_of(tmp_path, MACHINE_OWN) == before, "a refused run must write nothing"
    assert [name for name in IN_ROOT if (Path("/") / name).exists()] == in_root, "a refused run wrote into /"


@pytest.mark.parametrize(
    ("args", "settings", "results"),
    [
        ([], {"NSPY_TUTORIAL_OUT": "~/runs/a"}, "home/runs/a"),  # ~ is HOME, not a folder named ~
        (["runs/b"], {}, "work/runs/b"),  # relative: from the current folder, not the clone
        (["{clone}/runs/c"], {}, "clone/runs/c"),  # a folder of its own inside the clone
        (["."], {}, "work"),  # an empty folder, here the current one
        # none given: the notebook's own default, in the clone, not the current folder
        ([], {}, f"clone/{OUTPUT_FOLDER}"),
        (["out"], {"NSPY_TUTORIAL_CELL_TIMEOUT": "0900"}, "work/out"),  # decimal, not octal
        (["out"], {"PYTHON": "../bin/python3", "FAKE_PYTHON_VERSION": "3.11.0"}, "work/out"),  # the oldest, relative
        (["out"], {"NSPY_TUTORIAL_CELL_TIMEOUT": "1", "NSPY_TUTORIAL_COMMIT": "abcdef0"}, "work/out"),
        (["out"], {"NSPY_TUTORIAL_CELL_TIMEOUT": "86400", "NSPY_TUTORIAL_COMMIT": "0123456789" * 4}, "work/out"),
    ],
)
def test_run_headless_accepts_the_edges_of_each_setting_and_writes_where_it_was_told(tmp_path, args, settings, results):
    clone = git_clone(tmp_path / "clone")  # a new folder in it is the run's own, the default one too
    (work := tmp_path / "work").mkdir()
    (home := tmp_path / "home").mkdir()
    args = [arg.format(clone=clone) for arg in args]
    for again in (False, True):  # the second run finds the first one's files and mark there: it may replace them
        if again:  # the fake pytest writes no notebook (FAKE_EXECUTED=none): an earlier one must not be rendered
            (tmp_path / results / NOTEBOOK.name).write_text("an earlier run's executed notebook")
        given = {"cwd": work, "HOME": home, "FAKE_EXECUTED": "none", **settings}  # no page: a quick run
        status, output, _ = run_script(str(clone / HEADLESS), tmp_path, *args, **given)
        assert status == 0, f"{args} {settings} must be accepted:\n{output[-1500:]}"
    assert (tmp_path / results / ".nspy_tutorial_out").is_file(), "the folder it made must carry its mark"
    assert not (tmp_path / results / NOTEBOOK.name).exists(), f"an earlier run's notebook was kept: {output}"
    assert not list((tmp_path / results).glob(".run_info.json.partial")), "run_info.json: written whole, then moved"
    timeout = int(settings.get("NSPY_TUTORIAL_CELL_TIMEOUT", "900"))
    assert f"cell timeout {timeout} s" in output, f"the GPU test must get the cell timeout {timeout} in seconds"
    info = json.loads((tmp_path / results / "run_info.json").read_text())
    assert info["commit"] == settings.get("NSPY_TUTORIAL_COMMIT", "unknown"), "run_info.json names the commit told"


def test_run_headless_runs_the_gpu_tests_once_with_python_records_the_run_and_exits_with_pytests_status(tmp_path):
    cut_short = tmp_path / "cut_short.ipynb"  # what a run killed while nbmake wrote the notebook leaves
    cut_short.write_text('{"cells": [{"cell_type": "code", "source": "import nsight"')
    (tmp_path / "summary.json").write_text("{}")
    wrong = fakes.failing_command(tmp_path / "wrong/python3", "WRONG PYTHON")  # no harness
    path = os.pathsep.join([str(wrong.parent), str(tmp_path / "bin"), os.environ["PATH"]])
    status, output, asked = run_script(
        HEADLESS, tmp_path, str(tmp_path / "run"), FAKE_PYTEST_EXIT=5, FAKE_EXECUTED=cut_short, PATH=path
    )
    assert status == 5, f"pytest's exit status (5: nothing ran) must be the run's, page or not:\n{output}"
    assert "reading_page.py --executed" in output and "Traceback" not in output, "a broken page: say how to redo it"
    assert "WRONG PYTHON" not in output, "every step must use PYTHON, not the python3 on PATH"
    info = json.loads((tmp_path / "run" / "run_info.json").read_text())
    assert info["pytest_exit"] == 5 and info["notebook_sha256"] == hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info["started_utc"]) and info["wall_seconds"] >= 0, info
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert info["commit"] == (head or "unknown"), "run_info.json must name the full commit that ran"
    (call,) = [shlex.split(line) for line in asked if line.startswith("-m pytest")]  # now run for real, without a GPU
    env = dict(os.environ, NSPY_TUTORIAL_OUT=str(tmp_path / "gpu_out"), NSPY_TUTORIAL_CELL_TIMEOUT="abc")
    env["PATH"] = f"{fakes.nvidia_smi(tmp_path / 'no_gpu', gpu=None).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run([sys.executable, *call], cwd=ROOT, env=env, capture_output=True, text=True)
    skipped = re.search(r"(\d+) skipped", done.stdout)
    assert done.returncode == 0 and skipped and " passed" not in done.stdout, done.stdout[-2000:]
    assert "no NVIDIA GPU here" in done.stdout and not (tmp_path / "gpu_out").exists(), done.stdout[-2000:]
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_notebook_gpu.py"]
    plain = subprocess.run(collect, cwd=ROOT, capture_output=True, text=True)
    assert f"{skipped.group(1)} deselected" in plain.stdout and "::" not in plain.stdout, "CPU suite ran a GPU test"


@pytest.mark.parametrize("wheelhouse", [None, "complete", "nbmake only"])
def test_prepare_only_installs_the_missing_harness_into_python_holding_torch(tmp_path, wheelhouse):
    pins = {"nbmake": HARNESS["nbmake"]} if wheelhouse == "nbmake only" else HARNESS
    settings = {"NSPY_TUTORIAL_WHEELHOUSE": make_wheelhouse(tmp_path / "wh", pins, {})} if wheelhouse else {}
    status, output, asked = run_script(HEADLESS, tmp_path, "--prepare-only", FAKE_HARNESS_MISSING=1, **settings)
    if wheelhouse == "nbmake only":  # blame the wheelhouse, not the network
        assert status == 2 and not pip_installs(tmp_path), output
        assert f"NSPY_TUTORIAL_WHEELHOUSE={tmp_path / 'wh'}" in output and "make_wheelhouse.py" in output, output
        return
    assert status == 0, output
    (install,) = pip_installs(tmp_path)
    assert install["python"] == str(tmp_path / "bin" / "python3") and install["requirements"] == HARNESS
    assert (install["index"], install["find_links"]) == ((None, str(tmp_path / "wh")) if wheelhouse else ("PyPI", None))
    assert install["constraints"].get("torch") == "2.11.0", "pip must hold the installed torch at its version"
    assert not any(line.startswith(("-m ipykernel", "-m pytest")) for line in asked), "only the harness is installed"
    (tmp_path / "again").mkdir()
    assert run_script(HEADLESS, tmp_path / "again", "--prepare-only")[0] == 0
    assert not pip_installs(tmp_path / "again"), "a complete harness is not installed again"


SITECUSTOMIZE = WITHOUT_MODULES.split("sys.argv")[0]  # the runner's Python outside the notebook's kernel lacks these


def test_readme_first_command_runs_on_a_fresh_clone_and_writes_the_readers_page(tmp_path):
    readme = (ROOT / "README.md").read_text().split("## Two commands on a fresh clone", 1)[1]
    first = re.search(r"```bash\n(.*?)\n", readme).group(1).split("#")[0].strip()
    clone = fresh_clone(tmp_path / "clone")
    env = script_machine(tmp_path)
    del env["PYTHON"]  # as a user runs it: python3 from PATH
    (site := tmp_path / "site").mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(absent=("nsight", "ncu_report", "IPython")))
    env.update(FAKE_HARNESS_MISSING="1", PYTHONPATH=str(site))
    done = subprocess.run(["bash", "-c", first], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"README's first command failed on a fresh clone:\n{done.stdout}{done.stderr}"
    assert pip_installs(tmp_path)[0]["index"] == "PyPI" and "could not render" not in done.stderr, done.stderr
    text = (clone / OUTPUT_FOLDER / "reading_page.ipynb").read_text()  # the default output folder
    folded = ["".join(cell["source"]) for cell in json.loads(text)["cells"] if cell["metadata"].get("cellView")]
    defining = [source.splitlines()[0] for source in folded if re.search(r"^(def|class) ", source, re.M)]
    assert folded and not defining, f"the folded cells' code must be dropped: {defining}"
    assert "Output folder:" in text and "summary.json in" in text, "the folded cells' outputs must stay on the page"


@pytest.mark.parametrize("option", ["--help", "-h"])
def test_help_prints_the_usage_and_does_nothing_else(tmp_path, option):
    code, output, asked = run_script(HEADLESS, tmp_path, option, FAKE_HARNESS_MISSING=1)
    assert code == 0 and output.startswith(f"usage: {HEADLESS}"), output
    assert asked == [] and sorted(p.name for p in tmp_path.iterdir()) == ["bin", "python.log"], f"{option} did {asked}"


def test_folders_the_recipes_make_are_ignored_by_git():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for folder in ("wheelhouse", "record_env", "record_ncu_work", OUTPUT_FOLDER):
        done = subprocess.run(["git", "check-ignore", "-q", f"{folder}/x.whl"], cwd=ROOT)
        assert done.returncode == 0, f"{folder}/ (made by a README command) is not in .gitignore"


def test_the_run_uses_a_python3_kernel_of_its_own_and_leaves_the_users_kernel_spec_alone(tmp_path):
    mine = tmp_path / ".local/share/jupyter/kernels/python3/kernel.json"  # HOME is tmp_path
    mine.parent.mkdir(parents=True)
    mine.write_text('{"argv": ["/my/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]}')
    status, output, _ = run_script(HEADLESS, tmp_path, str(tmp_path / "out"), FAKE_EXECUTED="none")
    used = Path(re.search(r"the python3 kernel: (\S+)", output).group(1))
    assert status == 0 and "/my/python" in mine.read_text(), f"the user's python3 kernel spec was replaced:\n{output}"
    assert used != mine.parent and not used.exists(), f"run with {used}, not a kernel spec of its own, gone after"
