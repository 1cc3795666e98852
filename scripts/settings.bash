# The setting checks run_headless and run_tests share (sourced). Each sets REPLY or calls the caller's refuse.

# usage: absolute_folder SETTING VALUE   ~ and ~user expanded (the setting quoted them), a relative folder made absolute
absolute_folder() {
  local setting="$1" value="$2" user rest home
  case "$value" in
    "~" | "~/"*) value="$HOME${value#"~"}" ;;
    "~"*)
      user="${value#"~"}"; user="${user%%/*}"; rest="${value#"~$user"}"
      # getent, not eval: the value is the user's text and must never run as code.
      if ! home="$(getent passwd "$user" 2>/dev/null | cut -d: -f6)" || [ -z "$home" ]; then
        refuse "$setting: there is no user '$user' here, so ~$user names no home folder. Give the folder's" \
               "full path (or ./~$user for a folder of that name)."
      fi
      value="$home$rest" ;;
  esac
  case "$value" in /*) ;; *) value="$PWD/$value" ;; esac
  REPLY="$value"
}

# usage: check_python GIVEN WHO   PYTHON checked and made absolute; the probe must print a version (/bin/true exits 0)
check_python() {
  local given="$1" who="$2" path version status=0
  local fix="Set PYTHON to a Python 3.11 or newer, e.g. PYTHON=/usr/bin/python3.12"
  case "$given" in
    */*) path="$given" ;;
    *) path="$(type -P -- "$given")" || path="" ;;  # a command name: looked up on PATH only, as the shell does
  esac
  if [ -z "$path" ] && [ -e "$given" ]; then
    refuse "PYTHON=$given is not an executable Python: $given here is a file, and a name without a / is looked" \
           "up as a command on PATH, where there is none of that name. $fix."
  elif [ -z "$path" ] || [ ! -e "$path" ]; then
    refuse "PYTHON=$given: not found (no such command or file). $fix."
  elif [ -d "$path" ] || [ ! -x "$path" ]; then
    refuse "PYTHON=$given is not an executable Python (a folder, or a file without execute permission). $fix."
  fi
  case "$path" in /*) ;; *) path="$PWD/$path" ;; esac  # not resolving symlinks: a venv's python is one
  version="$("$path" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1)" || status=$?
  if [ "$status" -ne 0 ]; then
    refuse "PYTHON=$given does not run: ${version%%$'\n'*}. Set PYTHON to a Python 3.11 or newer that runs" \
           "here, e.g. PYTHON=/usr/bin/python3.12 (for a pyenv shim, select that version first)."
  fi
  if ! [[ "$version" =~ ^3\.([0-9]+)\.[0-9]+$ ]]; then
    refuse "PYTHON=$given is not an executable Python: it ran but did not report a Python version" \
           "(it printed: ${version:0:80}). $fix."
  fi
  if [ "${BASH_REMATCH[1]}" -lt 11 ]; then
    refuse "$who needs Python 3.11 or newer (ipykernel 7.4 does); PYTHON=$given is older ($version). $fix."
  fi
  REPLY="$path"
}
