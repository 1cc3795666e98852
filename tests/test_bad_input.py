"""Bad input to the scripts and the README's commands, tried as a new user would.

Every wrong setting gets a message that names it and the fix, a non-zero exit, and nothing written outside
the output folder; the README's commands work verbatim on a fresh clone. The scripts run for real (bash),
with a fake python3 and nvidia-smi on PATH (tests/fake_env.py) that record what they were asked to do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import make_wheelhouse as wheelhouse_script  # noqa: E402
import pytest
from fake_env import (
    FakeMachine,
    fresh_clone,
    invoked,
    make_wheelhouse,
    pip_installs,
    requirement_pins,
    run_script,
    script_machine,
)
from support import ROOT, WITHOUT_MODULES

from plumbing.harness import OUTPUT_FOLDER, choose_output_dir

# The front page and the maintainers' page it links: their recipes, found by heading, run verbatim.
README = (ROOT / "README.md").read_text() + "\n" + (ROOT / "docs" / "maintainers.md").read_text()
# What the old run_headless wrote into / when its output folder could not be made.
LEFT_IN_ROOT = ("pytest.log", "run_info.json", "nsight_python_t4_tutorial.ipynb", "nsight_python_t4_tutorial.html")


def readme_commands(heading: str) -> list[str]:
    """The commands of the ```bash blocks under a README heading (any level), continuation lines joined."""
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", README, re.S | re.M)
    assert match, f"neither README.md nor docs/maintainers.md has the heading {heading!r}"
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", match.group(1), re.S):
        text = re.sub(r"\\\n\s*", " ", block)
        commands += [line.strip() for line in text.splitlines() if line.strip()]
    return commands


# ---------------------------------------------------------------- scripts/run_headless
def test_run_headless_without_a_gpu_stops_before_it_installs_anything(tmp_path):
    status, output, asked = run_script("scripts/run_headless", tmp_path, gpu=False, FAKE_HARNESS_MISSING=1)
    assert status != 0, f"no GPU must be a failure, not a pass with skipped tests:\n{output}"
    assert "no NVIDIA GPU" in output and "scripts/run_tests" in output, output
    for step in ("-m pip install", "-m ipykernel install", "-m pytest"):
        assert not invoked(asked, step), f"without a GPU run_headless ran `python {step}` before failing"


@pytest.mark.parametrize("kind", ["under /proc", "a file", "under a file"])
def test_run_headless_refuses_an_unusable_output_folder_and_writes_nowhere(tmp_path, kind):
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a folder")
    value = {"under /proc": "/proc/nspy_no_such/x", "a file": str(a_file), "under a file": f"{a_file}/run"}[kind]
    in_root_before = {name: (Path("/") / name).exists() for name in LEFT_IN_ROOT}
    status, output, asked = run_script(
        "scripts/run_headless", tmp_path, NSPY_TUTORIAL_OUT=value, FAKE_HARNESS_MISSING=1
    )
    assert status == 2, f"an unusable NSPY_TUTORIAL_OUT must stop the run (exit 2):\n{output}"
    assert f"NSPY_TUTORIAL_OUT={value}" in output and "writable folder" in output, output
    assert not invoked(asked, "-m pip install") and not invoked(asked, "-m pytest"), "it must stop before anything"
    written = [name for name in LEFT_IN_ROOT if (Path("/") / name).exists() and not in_root_before[name]]
    assert not written, f"run_headless wrote {written} into / (the output folder was empty)"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bin", "python.log", "results.txt"]


def test_run_headless_names_the_output_folder_argument_when_that_is_the_bad_one(tmp_path):
    status, output, _ = run_script("scripts/run_headless", tmp_path, "/proc/nspy_no_such/x")
    assert status == 2 and "output folder argument (/proc/nspy_no_such/x)" in output, output


@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/run_tests"])
def test_scripts_say_a_missing_python_is_not_found_rather_than_older(tmp_path, script):
    status, output, _ = run_script(script, tmp_path, PYTHON="python3.99")
    assert status == 2, output
    assert "PYTHON=python3.99: not found" in output and "older" not in output, output


@pytest.mark.parametrize("state", ["missing", "empty"])
def test_run_headless_names_the_wheelhouse_setting_and_how_to_make_one(tmp_path, state):
    wheelhouse = tmp_path / "wheelhouse"
    if state == "empty":
        (wheelhouse / "cupti").mkdir(parents=True)  # a folder, but no wheel in it
    out = tmp_path / "out"
    status, output, asked = run_script(
        "scripts/run_headless",
        tmp_path,
        FAKE_HARNESS_MISSING=1,
        NSPY_TUTORIAL_WHEELHOUSE=wheelhouse,
        NSPY_TUTORIAL_OUT=out,
    )
    assert status == 2, output
    assert not out.exists(), "a bad wheelhouse must stop the run before it makes even the output folder"
    said = {"missing": "is not a folder", "empty": "holds no wheels"}[state]
    assert f"NSPY_TUTORIAL_WHEELHOUSE={wheelhouse} {said}" in output, output
    assert "scripts/make_wheelhouse.py --dest wheelhouse" in output and "check the network" not in output.lower()
    assert not invoked(asked, "-m pip install"), "a wheelhouse without wheels must be refused before pip runs"


def test_run_headless_blames_the_wheelhouse_not_the_network_when_a_wheel_is_missing(tmp_path):
    wheelhouse = make_wheelhouse(tmp_path / "wheelhouse", {"nbmake": "1.5.5"}, {})  # the other harness wheels lack
    status, output, _ = run_script(
        "scripts/run_headless",
        tmp_path,
        FAKE_HARNESS_MISSING=1,
        NSPY_TUTORIAL_WHEELHOUSE=wheelhouse,
        NSPY_TUTORIAL_OUT=tmp_path / "out",  # not the clone's default folder
    )
    assert status == 2, output
    assert not pip_installs(tmp_path), "pip must have failed for want of a wheel"
    assert f"from NSPY_TUTORIAL_WHEELHOUSE={wheelhouse}" in output and "make_wheelhouse.py" in output, output
    assert "network access, set" not in output, "offline, the advice to get network access does not help"


@pytest.mark.parametrize("pytest_exit", [0, 1])
def test_run_headless_reports_a_page_it_cannot_render_and_keeps_pytests_status(tmp_path, pytest_exit):
    cut_short = tmp_path / "cut_short.ipynb"  # what a run killed while nbmake wrote the notebook leaves
    cut_short.write_text('{"cells": [{"cell_type": "code", "source": "import nsight"')
    out = tmp_path / "run"
    status, output, _ = run_script(
        "scripts/run_headless", tmp_path, str(out), FAKE_EXECUTED=cut_short, FAKE_PYTEST_EXIT=pytest_exit
    )
    assert status == pytest_exit, f"a page that cannot be rendered must not change the run's result:\n{output}"
    assert "could not render" in output and "render_recorded.py --executed" in output, output
    assert "Traceback" not in output, f"a render failure needs a message, not a traceback:\n{output}"
    assert not (out / "nsight_python_t4_tutorial.html").exists()
    assert json.loads((out / "run_info.json").read_text())["pytest_exit"] == pytest_exit


# ---------------------------------------------------------------- README.md's commands, verbatim
def test_readme_first_command_runs_on_a_fresh_clone_from_pypi(tmp_path):
    first = readme_commands("Two commands on a fresh clone")[0]
    clone = fresh_clone(tmp_path / "clone")
    env = script_machine(tmp_path, gpu=True)
    env.update(FAKE_HARNESS_MISSING="1", NSPY_TUTORIAL_OUT=str(tmp_path / "out"))
    done = subprocess.run(["bash", "-c", first], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"README's first command failed on a fresh clone (no wheelhouse):\n{done.stderr}"
    (install,) = pip_installs(tmp_path)
    assert install["index"] == "PyPI", "with network access the harness comes from PyPI"
    assert (tmp_path / "out" / "nsight_python_t4_tutorial.html").exists(), f"no HTML page:\n{done.stderr}"


def test_readme_offline_way_makes_the_wheelhouse_the_run_then_uses(tmp_path):
    make, run = readme_commands("Offline, from a wheelhouse")
    clone = fresh_clone(tmp_path / "clone")
    env = script_machine(tmp_path, gpu=True)
    env.update(FAKE_HARNESS_MISSING="1", NSPY_TUTORIAL_OUT=str(tmp_path / "out"))
    subprocess.run(["bash", "-c", make], cwd=clone, env=env, check=True)
    made = invoked((tmp_path / "python.log").read_text().splitlines(), "scripts/make_wheelhouse.py")[0].split()
    dest = clone / made[made.index("--dest") + 1]
    main, cupti = wheelhouse_script.read_requirements(ROOT / "requirements.txt")
    harness = requirement_pins(ROOT / "requirements-harness.txt")  # make_wheelhouse.py adds the harness
    make_wheelhouse(dest, {**dict(pin.split("==") for pin in main), **harness}, dict(pin.split("==") for pin in cupti))
    done = subprocess.run(["bash", "-c", run], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"README's offline command failed with the wheelhouse it makes:\n{done.stderr}"
    (install,) = pip_installs(tmp_path)
    assert install["index"] is None and install["find_links"] == str(dest), f"not from the wheelhouse only: {install}"


def test_readme_rerecording_recipe_installs_from_the_wheelhouse_and_records_with_it(tmp_path):
    recipe = "\n".join(readme_commands("Re-recording the Nsight Compute data"))  # install, settings, record
    machine = FakeMachine(tmp_path / "machine")
    env = machine.build()
    clone = fresh_clone(tmp_path / "clone")
    main, cupti = wheelhouse_script.read_requirements(ROOT / "requirements.txt")
    pins, cupti_pins = dict(pin.split("==") for pin in main), dict(pin.split("==") for pin in cupti)
    make_wheelhouse(clone / "wheelhouse", pins, cupti_pins)
    # The recorder's stand-in reports what the real one would import, and from where.
    (clone / "scripts" / "record_ncu.py").write_text(
        "import importlib.metadata as m, json, os, pathlib\n"
        "found = {}\n"
        "for d in m.distributions():  # the first on sys.path wins, as for imports\n"
        "    found.setdefault(d.metadata['Name'], str(d.locate_file('')))\n"
        "cupti = pathlib.Path(os.environ['NSPY_TUTORIAL_CUPTI_DIR'])\n"
        "print(json.dumps({'found': found, 'libcupti': [str(p) for p in cupti.glob('nvidia/*/lib/libcupti.so.13')]}))\n"
    )
    bin_dir = tmp_path / "python_bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    done = subprocess.run(["bash", "-c", recipe], cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"the README's re-recording recipe failed:\n{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for name in pins:
        assert Path(report["found"].get(name, "")).name == "packages", (
            f"the recorder did not import {name} from record_env"
        )
    assert report["libcupti"], "the CUPTI set (libcupti.so.13) is not in NSPY_TUTORIAL_CUPTI_DIR"
    pip_calls = machine.calls("pip")
    assert len(pip_calls) == 2 and all("--no-deps" in call["argv"] for call in pip_calls), pip_calls


def test_folders_the_readme_commands_make_are_ignored_by_git():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for folder in ("wheelhouse", "record_env", "record_ncu_work", OUTPUT_FOLDER):
        done = subprocess.run(["git", "check-ignore", "-q", f"{folder}/x.whl"], cwd=ROOT)
        assert done.returncode == 0, f"{folder}/ (made by a README command) is not in .gitignore"


# ---------------------------------------------------------------- scripts/render_recorded.py
RECORDINGS = sorted(path.parent for path in (ROOT / "docs/verified").glob("*/recording.json"))


def test_render_recorded_without_nbformat_says_what_to_run_instead():
    # -S: this Python without its site-packages, like a plain system python3 that lacks nbformat
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "scripts/render_recorded.py")], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode != 0, "a missing nbformat must fail the script"
    assert "Traceback" not in done.stderr, f"a missing package must get a message, not a traceback:\n{done.stderr}"
    assert "lacks nbformat" in done.stderr and ".ci/venv/bin/python scripts/render_recorded.py" in done.stderr


# What the GPU runner's Python lacks outside the notebook's kernel (the notebook installs nsight and ncu-report into
# its own folder); run_headless renders the page with that Python.
ABSENT_ON_THE_RUNNER = ("nsight", "ncu_report", "IPython")


def test_render_recorded_makes_the_run_page_in_a_python_without_nsight_ncu_report_or_ipython(tmp_path):
    (executed,) = sorted(ROOT.glob("docs/verified/*-cupti/nsight_python_t4_tutorial.ipynb"))[-1:]
    shutil.copy(executed, tmp_path / executed.name)
    shutil.copy(executed.parent / "summary.json", tmp_path / "summary.json")  # run_headless writes both
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MODULES.format(absent=ABSENT_ON_THE_RUNNER),
         str(ROOT / "scripts/render_recorded.py"), "--executed", str(tmp_path / executed.name)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, f"render_recorded.py --executed needs one of {ABSENT_ON_THE_RUNNER}:\n{done.stderr}"
    assert (tmp_path / "nsight_python_t4_tutorial.html").exists(), done.stdout + done.stderr


@pytest.mark.skipif(not RECORDINGS, reason="no docs/verified/*/recording.json to render")
def test_the_committed_recorded_page_is_what_render_recorded_makes_today_and_rendering_it_again_changes_no_file(
    tmp_path,
):
    """One render in a copy of the repository: every committed file must come out byte for byte (no cell ids,
    timestamps or timings leak in, and the page is not stale against today's notebook), and the renderer says
    nothing changed."""
    committed = RECORDINGS[0]
    repo = tmp_path / "repo"  # the page names its recording by its path in the repository: keep that path
    for part in ("scripts", "plumbing", committed.relative_to(ROOT)):
        shutil.copytree(ROOT / part, repo / part)
    for name in ("nsight_python_t4_tutorial.ipynb", "requirements.txt"):
        shutil.copy(ROOT / name, repo / name)
    folder = repo / committed.relative_to(ROOT)
    render = [sys.executable, "scripts/render_recorded.py", str(folder)]
    again = subprocess.run(render, check=True, capture_output=True, text=True, cwd=repo)
    before = {path.relative_to(committed): path.read_bytes() for path in committed.rglob("*") if path.is_file()}
    after = {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    changed = sorted(str(name) for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, (
        f"rendering {committed.relative_to(ROOT)} again rewrote {changed}: if the notebook changed, re-render and "
        f"commit the page (python scripts/render_recorded.py {committed.relative_to(ROOT)}); otherwise cell ids, "
        "timestamps or timings leak into the page"
    )
    assert "unchanged" in again.stdout, again.stdout


# ---------------------------------------------------------------- more bad input (issue 18), one test each
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_run_headless_help_prints_usage_and_does_nothing_else(tmp_path, flag):
    status, output, asked = run_script("scripts/run_headless", tmp_path, flag, FAKE_HARNESS_MISSING=1)
    assert status == 0 and output.startswith("usage: scripts/run_headless"), output
    assert "NSPY_TUTORIAL_CELL_TIMEOUT" in output, "the usage names the settings the script reads"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bin", "python.log"], f"{flag} made a folder"
    assert asked == [], f"run_headless {flag} asked python to {asked}"


def test_run_headless_refuses_an_unknown_option_instead_of_taking_it_as_the_folder(tmp_path):
    status, output, asked = run_script("scripts/run_headless", tmp_path, "--out", FAKE_HARNESS_MISSING=1)
    assert status == 2 and "unknown option --out" in output and "usage:" in output, output
    assert not (tmp_path / "--out").exists() and not invoked(asked, "-m pip install")


def test_run_headless_expands_a_tilde_in_the_output_setting_as_the_notebook_does(tmp_path):
    status, output, _ = run_script("scripts/run_headless", tmp_path, NSPY_TUTORIAL_OUT="~/runs/first")
    assert status == 0, output
    assert (tmp_path / "runs" / "first" / "run_info.json").exists(), "~ is the home folder (the fake HOME here)"
    assert not (tmp_path / "~").exists(), "a folder literally named ~ was made"


def test_run_headless_without_a_folder_setting_writes_where_the_notebook_run_in_the_clone_would(tmp_path, monkeypatch):
    clone = fresh_clone(tmp_path / "clone")
    # run from another folder; no executed notebook comes back, so no page is rendered
    status, output, _ = run_script(str(clone / "scripts/run_headless"), tmp_path, FAKE_EXECUTED=tmp_path / "none")
    assert status == 0, output
    monkeypatch.chdir(clone)  # where the notebook runs when a user opens it in the clone
    notebook_folder = choose_output_dir({}, on_colab=False)
    written = sorted(path.name for path in notebook_folder.iterdir()) if notebook_folder.is_dir() else []
    assert {"pytest.log", "run_info.json"} <= set(written), (
        f"run_headless with no argument and no NSPY_TUTORIAL_OUT must write into the notebook's own default folder "
        f"{notebook_folder} (plumbing/harness.py choose_output_dir), which holds {written}:\n{output[-1500:]}"
    )


@pytest.mark.parametrize("script", ["scripts/run_headless", "scripts/run_tests"])
def test_scripts_say_a_python_that_does_not_run_does_not_run_rather_than_older(tmp_path, script):
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "python3.12").write_text(
        "#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\n"
        "echo 'The `python3.12` command exists in these Python versions: 3.12.3' >&2\nexit 127\n"
    )
    (shims / "python3.12").chmod(0o755)
    env_path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    status, output, _ = run_script(script, tmp_path, PYTHON="python3.12", PATH=env_path)
    assert status == 2, output
    assert "PYTHON=python3.12 does not run: pyenv: python3.12: command not found" in output, output
    assert "older" not in output, output


def test_run_headless_refuses_a_cell_timeout_that_is_not_a_number(tmp_path):
    status, output, asked = run_script(
        "scripts/run_headless", tmp_path, NSPY_TUTORIAL_CELL_TIMEOUT="abc", FAKE_HARNESS_MISSING=1
    )
    assert status == 2 and "NSPY_TUTORIAL_CELL_TIMEOUT=abc is not a whole number of seconds" in output, output
    assert not invoked(asked, "-m pip install") and not invoked(asked, "-m pytest")


def test_a_bad_cell_timeout_does_not_break_the_cpu_suite_and_the_gpu_test_names_it(tmp_path):
    env = {**os.environ, "NSPY_TUTORIAL_CELL_TIMEOUT": "abc"}
    collect = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "-m", "gpu",
               "tests/test_notebook_gpu.py"]  # fmt: skip
    done = subprocess.run(collect, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"a bad NSPY_TUTORIAL_CELL_TIMEOUT broke collection:\n{done.stdout[-2000:]}"
    from test_notebook_gpu import cell_timeout_s

    with pytest.raises(pytest.fail.Exception, match="NSPY_TUTORIAL_CELL_TIMEOUT='abc' is not a whole number"):
        cell_timeout_s({"NSPY_TUTORIAL_CELL_TIMEOUT": "abc"})
    assert cell_timeout_s({}) == 900 and cell_timeout_s({"NSPY_TUTORIAL_CELL_TIMEOUT": "60"}) == 60


@pytest.mark.parametrize("kind", ["a file", "a folder of other files"])
def test_run_tests_refuses_a_venv_setting_that_names_no_venv(tmp_path, kind):
    venv = tmp_path / "venv"
    if kind == "a file":
        venv.write_text("not a venv")
    else:
        venv.mkdir()
        (venv / "notes.txt").write_text("mine")
    status, output, asked = run_script("scripts/run_tests", tmp_path, NSPY_TUTORIAL_TEST_VENV=venv)
    assert status == 2 and f"NSPY_TUTORIAL_TEST_VENV={venv}" in output and "unset it" in output, output
    assert not invoked(asked, "-m venv"), "nothing may be made over the user's file or folder"


def test_run_tests_help_prints_usage_before_making_a_venv(tmp_path):
    status, output, asked = run_script("scripts/run_tests", tmp_path, "--help")
    assert status == 0 and output.startswith("usage: scripts/run_tests") and "NSPY_TUTORIAL_TEST_VENV" in output
    assert asked == [], f"--help asked python to {asked}"


def test_make_wheelhouse_names_a_missing_skip_installed_file_before_downloading(tmp_path, capsys):
    dest = tmp_path / "wheelhouse"
    with pytest.raises(SystemExit) as stopped:
        wheelhouse_script.main(["--dest", str(dest), "--skip-installed", str(tmp_path / "freeze.txt")])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert f"--skip-installed {tmp_path / 'freeze.txt'}: no such file" in said and "pip freeze" in said, said
    assert not dest.exists(), "nothing may be downloaded or made before the option is checked"


@pytest.mark.parametrize(
    ("content", "said"),
    [('{"cells": [{"cell_type": "code", "source": "import nsight"', "cannot read it as JSON"),
     ("[1, 2]", "it is JSON but not a notebook")],
)  # fmt: skip
@pytest.mark.parametrize("mode", ["--check", "--fix"])
def test_notebook_format_names_a_file_that_is_no_notebook_without_a_traceback(tmp_path, content, said, mode):
    broken = tmp_path / "broken.ipynb"
    broken.write_text(content)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/notebook_format.py"), mode, str(broken)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert said in done.stderr and "git checkout" in done.stderr and "Fix with" not in done.stdout, done
    assert broken.read_text() == content, f"{mode} changed a file it cannot read"


def test_notebook_format_check_advises_a_fix_command_that_runs_from_where_the_user_is(tmp_path):
    notebook = json.loads((ROOT / "nsight_python_t4_tutorial.ipynb").read_text())
    notebook["cells"][0]["metadata"] = {"collapsed": True}  # Colab noise: --fix removes it
    edited = tmp_path / "edited.ipynb"
    edited.write_text(json.dumps(notebook))
    check = [sys.executable, str(ROOT / "scripts/notebook_format.py"), "--check", str(edited)]
    done = subprocess.run(check, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    advice = done.stdout.strip().splitlines()[-1]
    assert advice.startswith("Fix with: python "), advice
    fix = advice.removeprefix("Fix with: python ").split()
    fixed = subprocess.run([sys.executable, *fix], capture_output=True, text=True, cwd=tmp_path)
    assert fixed.returncode == 0, f"the advised command failed from {tmp_path}: {fixed.stderr}"
    assert subprocess.run(check, capture_output=True, cwd=tmp_path).returncode == 0
