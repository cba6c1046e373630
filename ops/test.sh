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

if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (Debian package; the fleet view's browser tests)"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
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

# ---- Docker, for the compose-cluster tests (tests/cluster) -------------------------------
# As root on a machine without a running Docker engine (CI): install docker.io,
# docker-compose (v1) and debootstrap, start dockerd in the background (log in
# $DOCKERD_LOG), then build the images without any registry (ops/build-images.sh). When no
# engine can be had, the cluster tests FAIL, they are never skipped; on a machine without
# Docker, deselect them yourself: bash ops/test.sh -m 'not cluster'.
DOCKERD_LOG=${DOCKERD_LOG:-${TMPDIR:-/tmp}/daemonbus-dockerd.log}
engine_answers() { timeout 20 docker info >/dev/null 2>&1; }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }
if ! engine_answers && [ "$(id -u)" = 0 ]; then
  t=$(date +%s)
  if ! command -v dockerd >/dev/null || ! command -v docker-compose >/dev/null \
     || ! command -v debootstrap >/dev/null; then
    echo "== installing docker.io, docker-compose and debootstrap (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap \
      >/dev/null
    echo "   apt: $(elapsed "$t")"
  fi
  t=$(date +%s)
  echo "== starting dockerd (log: $DOCKERD_LOG)"
  # A pid file left by an engine that did not stop cleanly keeps a new one from starting.
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  nohup dockerd >"$DOCKERD_LOG" 2>&1 &
  deadline=$(( $(date +%s) + 60 ))
  until engine_answers; do
    if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 $! 2>/dev/null; then
      echo "!! dockerd did not start: the cluster tests will fail. Last lines of its log:" >&2
      tail -n 30 "$DOCKERD_LOG" >&2 || true
      break
    fi
    sleep 1
  done
  echo "   dockerd: $(elapsed "$t")"
fi
if engine_answers; then
  if ! command -v debootstrap >/dev/null && [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  t=$(date +%s)
  echo "== building the compose cluster's images (ops/build-images.sh)"
  if ! PYTHON="$VENV/bin/python" bash ops/build-images.sh; then
    echo "!! the image build failed: the cluster tests will fail" >&2
  fi
  echo "   images: $(elapsed "$t")"
else
  echo "!! no Docker engine answers: the cluster tests (-m cluster) will fail" >&2
fi

echo "== ruff";         ruff check .
echo "== mypy";         mypy
echo "== import-linter"; lint-imports
echo "== pytest"
exec pytest -q -p no:cacheprovider "$@"
