"""scripts/make_wheelhouse.py: the wheels an offline runner needs, the CUPTI set apart, --skip-installed dropping
only what this run downloaded; its arguments at their edges; the offline recipe."""

import os
import subprocess
import sys

import make_wheelhouse
import pytest
from evidence import runs, summary
from fakes import calls, files_of, fresh_clone, pip, pip_installs, real_python, requirement_pins, script_machine
from fakes import make_wheelhouse as fake_make_wheelhouse
from support import ROOT


def connected_machine(tmp_path) -> dict[str, str]:
    """A machine with internet: the suite's Python as python3, whose pip downloads (fakes.pip, logged in tmp_path)."""
    python = real_python(tmp_path / "py" / "python3")
    return {**os.environ, "PYTHONPATH": str(pip(tmp_path)), "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--python-version", "3.10.14"], "--python-version: '3.10.14'"),  # a patch level does not lift 3.10
        (["--python-version", "3.12."], "--python-version: '3.12.'"),
        (["--python-version", "3.99999999999999999999"], "3.11 to 3.19"),  # pip's memory grew without end
        (["--python-version", "3.20"], "--python-version: '3.20'"),
        (["--skip-installed", "README.md"], "line 'My own notes.' is no `name` or `name==version`"),  # no pip freeze
        (["--dest", "README.md"], "--dest README.md"),  # a file
        (["--dest", "/proc/nspy_no_such/wheels"], "--dest /proc/nspy_no_such/wheels"),
        (["--skip-installed", "freeze.txt"], "--skip-installed freeze.txt"),  # no such file
        *((["--python-version", version], None) for version in ("3.11", "3.12.3", "3.13")),
    ],  # None: accepted
)
def test_make_wheelhouse_checks_each_argument_before_pip_runs(arguments, said, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("My own notes.\n")
    asked = []
    monkeypatch.setattr(make_wheelhouse, "download", lambda requirements, dest, python, *a, **k: asked.append(python))
    argv = arguments if "--dest" in arguments else [*arguments, "--dest", str(tmp_path / "w")]
    if said is None:
        assert make_wheelhouse.main(argv) == 0 and asked == [arguments[1]] * 2, "download both sets for that Python"
        (tmp_path / "w" / "notes.txt").write_text("a file of its own folder is no reason to refuse it")
        assert make_wheelhouse.main(argv) == 0, "the folder it made and marked must be used again"
        return
    with pytest.raises(SystemExit) as stopped:
        make_wheelhouse.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and said in err, f"name the argument: {err}"
    assert not asked and sorted(path.name for path in tmp_path.iterdir()) == ["README.md"], "pip ran or a file made"


OWN = {"mine-1.0-py3-none-any.whl": "", "cupti/cuda_bindings-12.9.0-cp312-none-any.whl": "cupti"}  # the user's


def test_readme_offline_recipe_makes_the_wheelhouse_that_run_headless_then_installs_from(tmp_path):
    """docs/maintainers.md's offline recipe verbatim. Step 1 on a connected machine: for the runner's Python, without
    what the runner has but the notebook's pins, the CUPTI set apart, the user's own wheels kept; step 3 on the GPU."""
    section = (ROOT / "docs/maintainers.md").read_text().split("### Offline, from a wheelhouse", 1)[1]
    make, run = [block.split("```")[0].strip() for block in section.split("\n### ")[0].split("```bash\n")[1:]]
    dest = (clone := fresh_clone(tmp_path / "clone")) / "wheelhouse"
    for name in OWN:  # wheels the user had in --dest before: they stay, whatever they are
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(b"the user's own wheel")
    done = subprocess.run(
        ["bash", "-c", make], cwd=clone, env=connected_machine(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0, f"`{make}` failed:\n{done.stdout}{done.stderr}"
    runner_python = summary(runs()[-1])["environment"]  # the newest real run on the runner
    downloads = [call["argv"] for call in calls(tmp_path, "pip")]
    asked = {call[call.index("--python-version") + 1] for call in downloads}
    assert all(runner_python["python"].startswith(f"{v}.") for v in asked), f"wheels for Python {asked}?"
    into = [(call[call.index("--dest") + 1], "--no-deps" in call) for call in downloads]
    assert into == [(str(dest), False), (str(dest / "cupti"), True)], "the CUPTI set apart, without its dependencies"
    main, cupti = ({path.name.split("-")[0] for path in folder.glob("*.whl")} for folder in (dest, dest / "cupti"))
    assert "cuda_core" in main and "numpy" not in main, "the notebook's pins stay, a dependency the runner has goes"
    assert {"cupti_python", "nvidia_cuda_cupti", "pyelftools"} <= cupti, f"the CUPTI set lacks wheels: {cupti}"
    assert not list((dest / "cupti").glob("cuda_bindings-13*")), "cuda-bindings 13: the runner has it"
    assert all((dest / name).read_bytes() == b"the user's own wheel" for name in OWN), "a wheel it did not get went"
    runner = make_wheelhouse.read_installed(ROOT / "scripts/gpu-runner-installed.txt")
    assert (runner["torch"], runner["cuda-bindings"]) == ("2.11.0", "13.3.1"), "the runner's list, read"
    listed = {"nsight-python", "nbmake", "ipykernel", "cupti-python", "ncu-report"} & set(runner)
    assert not listed, f"{listed}: not on the runner; listing them in gpu-runner-installed.txt drops their wheels"
    harness = requirement_pins(ROOT / "requirements-harness.txt")
    on_runner = {name: version for name, version in harness.items() if runner.get(name) == version}
    lacking = sorted(n for n in harness if n not in on_runner and n.replace("-", "_") not in main)
    assert not lacking, f"pip on the runner could not install {lacking}: neither in the wheelhouse nor installed"
    fake_make_wheelhouse(dest, on_runner, {})  # the fake runner's pip only knows wheels: add those
    env = script_machine(gpu := tmp_path / "gpu")
    env.update(FAKE_HARNESS_MISSING="1", FAKE_EXECUTED="none")
    done = subprocess.run(["bash", "-c", run], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"`{run}` failed with the wheelhouse step 1 made:\n{done.stdout}{done.stderr}"
    (install,) = pip_installs(gpu)
    assert install["index"] is None and install["find_links"] == str(dest), install


@pytest.mark.parametrize(
    ("dest", "home", "said"),
    [
        ("~/wh", "", "--dest ~/wh: '~/wh' names no folder (a blank at either end, HOME empty"),
        ("../mine", "{tmp}/home", "mine holds files that are no wheels (README.md)"),
        (".", "{tmp}/home", "is a git clone"),
    ],
)
def test_make_wheelhouse_writes_only_into_a_wheelhouse_or_a_new_folder(dest, home, said, tmp_path):
    """Run from a git clone of its own (a wrong answer writes there, never into the developer's clone). The folder
    rules' other places (HOME, a .git, tracked files) are tests/test_output_folder_refusals.py's."""
    clone = fresh_clone(tmp_path / "clone")
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "README.md").write_text("mine")
    env = {**connected_machine(tmp_path), "HOME": home.format(tmp=tmp_path)}
    before = files_of(tmp_path)
    command = [sys.executable, "scripts/make_wheelhouse.py", "--dest", dest]
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and said in done.stderr, f"refuse --dest {dest}, naming why: {done.stderr}"
    assert "give a new or empty folder" in done.stderr, f"say what to give: {done.stderr}"
    assert files_of(tmp_path) == before and not calls(tmp_path, "pip"), "refused, yet it wrote or ran pip"
