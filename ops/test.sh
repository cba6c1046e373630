#!/usr/bin/env bash
# Install what the tests need and run them: the README's test command.
#   bash ops/test.sh            lint, types, layers, then every test suite
#   bash ops/test.sh -k cli     extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "== installing redis-server (Debian package)"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

VENV=${DAEMONBUS_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  python3 -m venv "$VENV"
fi
echo "== installing daemonbus with its test extras"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q -e '.[test]'

export PATH="$PWD/$VENV/bin:$PATH"
echo "== ruff";         ruff check .
echo "== mypy";         mypy
echo "== import-linter"; lint-imports
echo "== pytest"
exec pytest -q -p no:cacheprovider "$@"
