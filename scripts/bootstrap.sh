# Sourced by scripts/quickstart and scripts/test: a virtual environment with the project installed
# from the pinned set (constraints.txt). Re-running is cheap: nothing is reinstalled unless
# pyproject.toml or constraints.txt changed.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CONVEYOR_VENV:-$ROOT/.venv}"
UV_VERSION="0.13.9"

find_python() {
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)'; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "conveyor: Python 3.11, 3.12 or 3.13 is required" >&2
  return 1
}

bootstrap_uv() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating virtual environment in $VENV"
    "$(find_python)" -m venv "$VENV"
  fi
  if ! "$VENV/bin/uv" --version 2>/dev/null | grep -q "$UV_VERSION"; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
  fi
}

bootstrap() {
  bootstrap_uv
  local stamp="$VENV/.conveyor-installed"
  local wanted
  # (the trailing word changes when the install steps below do, so existing environments redo them)
  wanted="$( (cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt"; echo bytecode) | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    echo "==> installing Conveyor and its pinned dependencies (constraints.txt)"
    "$VENV/bin/uv" pip install --python "$VENV/bin/python" --quiet \
      -c "$ROOT/constraints.txt" -e "$ROOT[test]"
    # The editable build leaves package metadata in src/; nothing reads it there.
    rm -rf "$ROOT"/src/*.egg-info
    # Bytecode now, once: where PYTHONDONTWRITEBYTECODE is set (CI images often set it), every
    # Airflow process would otherwise compile its ~1,600 modules from source at each start
    # (import airflow.models + airflow.sdk: 5.6 s without .pyc files, 2.3 s with them, here).
    "$VENV/bin/python" -m compileall -q -j 0 \
      "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
    echo "$wanted" >"$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}
