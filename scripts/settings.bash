# The setting checks run_headless and run_tests share (sourced). Each sets REPLY or calls the caller's refuse.

# check_python's probe runs PYTHON with NSPY_TUTORIAL_PROBE set: a PYTHON that is one of these scripts stops here at
# once, instead of running itself again from its own probe without end.
[ -z "${NSPY_TUTORIAL_PROBE:-}" ] || refuse "PYTHON is one of this project's scripts (found when" \
  "$NSPY_TUTORIAL_PROBE ran it as its Python): set PYTHON to a Python 3.11 or newer, e.g. PYTHON=/usr/bin/python3.12."

PYTHON_ANSWER_S=30   # seconds PYTHON may take to print its version: one that hangs is refused, not waited on for ever
TORCH_ANSWER_S=180   # seconds PYTHON may take to import torch (a cold disk is slow)
STEP_S=600           # seconds any other step of PYTHON's may take (a check, the venv, a kernel spec, the reader's page)
PIP_S=1800           # seconds one pip install may take; timeout ends what it started (its own process group)

# usage: absolute_folder PYTHON SETTING VALUE   the folder as the notebook reads one (plumbing/folders.py, from $repo):
# ~ and ~user expanded (the setting quoted them), a relative folder made absolute. The answer is PYTHON's stdout only:
# a warning it prints on stderr (left to the terminal) must never become part of the path.
absolute_folder() {
  REPLY="$(PYTHONPATH="$repo" timeout -k 5 "$PYTHON_ANSWER_S" "$1" -c 'import sys
from plumbing.folders import folder_setting
try:
    print(folder_setting(*sys.argv[1:]))
except ValueError as error:  # the folder rules refused it: the answer, on stdout
    print(error)
    sys.exit(1)' "$2" "$3" "Give the folder's full path." </dev/null)" \
    || refuse "${REPLY:-$2: PYTHON could not check that folder (its error is above)}"
}

# usage: check_python GIVEN WHO   PYTHON checked and made absolute; the probe must print a version (/bin/true exits 0)
check_python() {
  local given="$1" path version status=0
  local fix="Set PYTHON to a Python 3.11 or newer that runs here, e.g. PYTHON=/usr/bin/python3.12"
  case "$given" in */*) path="$given" ;; *) path="$(type -P -- "$given")" || true ;; esac  # a name: on PATH only
  if ! [ -f "$path" ] || ! [ -x "$path" ]; then
    refuse "PYTHON=$given: no executable file of that name (a name without a / is a command on PATH). $fix."
  fi
  case "$path" in /*) ;; *) path="$PWD/$path" ;; esac  # not resolving symlinks: a venv's python is one
  version="$(NSPY_TUTORIAL_PROBE="$2" timeout -k 5 "$PYTHON_ANSWER_S" "$path" \
    -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' \
    2>&1 </dev/null)" || status=$?
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    refuse "PYTHON=$given did not answer within $PYTHON_ANSWER_S s (asked for its version). $fix."
  elif [ "$status" != 0 ]; then
    [ -n "$version" ] || version="it exited with status $status and printed nothing"
    refuse "PYTHON=$given does not run: ${version%%$'\n'*}. $fix (for a pyenv shim, select that version first)."
  elif ! [[ "$version" =~ ^3\.([0-9]+)\.[0-9]+$ ]]; then
    refuse "PYTHON=$given is not a Python: it printed no Python version (${version:0:80}). $fix."
  fi
  if [ "${BASH_REMATCH[1]}" -lt 11 ]; then
    refuse "$2 needs Python 3.11 or newer (ipykernel 7.4 does); PYTHON=$given is $version. $fix."
  fi
  REPLY="$path"
}

# usage: check_cuda_torch PYTHON GIVEN   PYTHON must import a CUDA build of torch (the notebook measures with it)
check_cuda_torch() {
  local said status=0
  local fix="Set PYTHON to the GPU machine's Python that has a CUDA build of torch (run_headless never installs one)"
  said="$(timeout -k 5 "$TORCH_ANSWER_S" "$1" -c 'import torch
print(torch.__version__, torch.version.cuda)' 2>&1 </dev/null)" || status=$?
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    refuse "PYTHON=$2 did not import torch within $TORCH_ANSWER_S s. $fix."
  elif [ "$status" != 0 ]; then
    refuse "PYTHON=$2 cannot import torch (${said##*$'\n'}). $fix."
  elif [[ "$said" == *" None" ]]; then
    refuse "PYTHON=$2 has torch ${said%% *}, a build without CUDA. $fix."
  fi
}
