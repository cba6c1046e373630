#!/usr/bin/env bash
# Build the images of the compose cluster, without needing an image registry.
#
#   bash ops/build-images.sh
#
# 1. secrets: .env (one Redis password per role) if missing, and ops/redis/users.acl for
#    this code (ops/compose-env.sh);
# 2. the base image: $BASE_IMAGE when given and present or pullable; otherwise
#    $DAEMONBUS_BASE_IMAGE (default daemonbus-base:bookworm) made from Debian's packages with
#    debootstrap (python3, python3-venv, redis-server, ca-certificates), once: an existing one
#    is reused;
# 3. the wheelhouse (ops/wheelhouse): the daemonbus wheel and its dependencies resolved on
#    this host for the base image's Python version and platform (Debian 12's Python 3.11.2
#    needs async-timeout for redis-py, a newer one does not), binary wheels only;
# 4. $DAEMONBUS_IMAGE (default daemonbus:local) from ops/Dockerfile;
# 5. $DAEMONBUS_PAUSE_IMAGE (default daemonbus-pause:local), the docker runtime's pod
#    sandbox, from ops/pause.
#
# Environment: BASE_IMAGE, DAEMONBUS_BASE_IMAGE, DAEMONBUS_IMAGE, DAEMONBUS_PAUSE_IMAGE,
# PYTHON (the host Python whose pip builds the wheelhouse; default python3), DEBIAN_SUITE
# (bookworm), DEBIAN_MIRROR (default: the first Debian URI in this host's apt sources, else
# debootstrap's own).
# Needs root for debootstrap (only when the Debian base image is built).
set -euo pipefail
cd "$(dirname "$0")/.."

DAEMONBUS_IMAGE=${DAEMONBUS_IMAGE:-daemonbus:local}
DAEMONBUS_PAUSE_IMAGE=${DAEMONBUS_PAUSE_IMAGE:-daemonbus-pause:local}
DAEMONBUS_BASE_IMAGE=${DAEMONBUS_BASE_IMAGE:-daemonbus-base:bookworm}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
PYTHON=${PYTHON:-python3}
WHEELHOUSE=ops/wheelhouse
# The legacy builder: it needs no buildx plugin and talks to any engine version.
export DOCKER_BUILDKIT=0

LOG=$(mktemp)  # output of the steps that print much, shown only when they fail
trap 'rm -f "$LOG"' EXIT
say() { printf '== %s\n' "$*"; }
now() { date +%s; }
T0=$(now)

# ---- 1. secrets ----------------------------------------------------------------------------
# (always: the ACL names the SHA-1 of the scripts of the code being built; .env is kept)
bash ops/compose-env.sh

# ---- 2. base image -------------------------------------------------------------------------
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

apt_mirror() {
  # The first non-security Debian URI this host's apt uses (deb822 or one-line format).
  local uri
  uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' \
        | grep -v security | head -n 1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
          | sed 's/\[[^]]*\] *//' | awk '{print $2}' | grep -v security | head -n 1 || true)
  fi
  printf '%s' "$uri"
}

build_debian_base() {
  if image_exists "$DAEMONBUS_BASE_IMAGE"; then
    say "base image $DAEMONBUS_BASE_IMAGE exists: reused"
    return
  fi
  command -v debootstrap >/dev/null || {
    echo "build-images: debootstrap is not installed (apt-get install debootstrap)" >&2
    exit 1
  }
  local dir mirror t
  t=$(now)
  dir=$(mktemp -d /var/tmp/daemonbus-rootfs.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$dir' '$dir.log' '$LOG'" EXIT
  mirror=${DEBIAN_MIRROR:-$(apt_mirror)}
  say "debootstrap $DEBIAN_SUITE (minbase + python3, python3-venv, redis-server) into $dir"
  debootstrap --variant=minbase --include=python3,python3-venv,redis-server,ca-certificates \
    "$DEBIAN_SUITE" "$dir" ${mirror:+"$mirror"} >"$dir.log" 2>&1 || {
      tail -n 30 "$dir.log" >&2; rm -f "$dir.log"; exit 1; }
  rm -f "$dir.log"
  # Smaller image: no package caches, lists, documentation or manual pages.
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* \
         "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/*
  say "importing it as $DAEMONBUS_BASE_IMAGE"
  tar -C "$dir" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["/bin/bash"]' - "$DAEMONBUS_BASE_IMAGE" >/dev/null
  rm -rf "$dir"
  trap 'rm -f "$LOG"' EXIT
  say "base image built in $(( $(now) - t )) s"
}

base=${BASE_IMAGE:-}
if [ -n "$base" ] && ! image_exists "$base"; then
  say "pulling $base"
  if ! docker pull -q "$base" >/dev/null 2>&1; then
    echo "build-images: cannot pull $base; building $DAEMONBUS_BASE_IMAGE from Debian's" \
         "packages instead" >&2
    base=""
  fi
fi
if [ -z "$base" ]; then
  build_debian_base
  base=$DAEMONBUS_BASE_IMAGE
fi

# ---- 3. wheelhouse -------------------------------------------------------------------------
probe=$(docker run --rm --entrypoint python3 "$base" -c 'import platform
print(platform.python_version(), platform.machine(), platform.libc_ver()[1] or "none")') || {
  echo "build-images: cannot run python3 in $base" >&2; exit 1; }
read -r pyver machine glibc <<<"$probe"
case "$glibc" in
  2.*) ;;
  *) echo "build-images: $base has no glibc (needed for manylinux wheels)" >&2; exit 1 ;;
esac
abi="cp$(echo "$pyver" | cut -d. -f1,2 | tr -d .)"
say "wheelhouse for Python $pyver ($abi, $machine, glibc $glibc) of $base"
rm -rf "$WHEELHOUSE"
mkdir -p "$WHEELHOUSE"
# (its build backend's warnings are shown only when the build fails)
if ! "$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$WHEELHOUSE" . >"$LOG" 2>&1; then
  cat "$LOG" >&2
  exit 1
fi
# Wheels for any glibc up to the image's own (pip does not infer the older ones).
platforms=()
for minor in $(seq "$(echo "$glibc" | cut -d. -f2)" -1 5); do
  platforms+=(--platform "manylinux_2_${minor}_${machine}")
done
platforms+=(--platform "manylinux2014_${machine}")
download() {
  "$PYTHON" -m pip download -q --dest "$WHEELHOUSE" --only-binary=:all: \
    --python-version "$pyver" --implementation cp --abi "$abi" "${platforms[@]}" "$@" \
    2> >(grep -v 'is neither a file nor a directory' >&2)  # a pip.conf naming absent dirs
}
download "$WHEELHOUSE"/daemonbus-*.whl
# pip evaluates dependency markers with the host's Python: add what the image's one needs.
for _ in 1 2 3 4 5; do
  mapfile -t extra < <("$PYTHON" ops/wheelhouse_missing.py "$WHEELHOUSE" "$pyver" "$machine")
  [ "${#extra[@]}" -gt 0 ] || break
  say "adding for Python $pyver: ${extra[*]}"
  download "${extra[@]}"
done
ls "$WHEELHOUSE" | sed 's/^/   /'

# ---- 4. the daemonbus image ----------------------------------------------------------------
say "building $DAEMONBUS_IMAGE from ops/Dockerfile (BASE_IMAGE=$base)"
if ! docker build -f ops/Dockerfile --build-arg "BASE_IMAGE=$base" -t "$DAEMONBUS_IMAGE" ops \
     >"$LOG" 2>&1; then
  cat "$LOG" >&2
  exit 1
fi
if ! docker run --rm --entrypoint sh "$DAEMONBUS_IMAGE" -c 'command -v redis-server' \
     >/dev/null 2>&1; then
  echo "build-images: $DAEMONBUS_IMAGE has no redis-server: run compose with" \
       "DAEMONBUS_REDIS_IMAGE=redis:7 (in .env or the environment)" >&2
fi

# ---- 5. the pod sandbox image --------------------------------------------------------------
say "building $DAEMONBUS_PAUSE_IMAGE from ops/pause"
if ! docker build -f ops/pause/Dockerfile --build-arg "BASE_IMAGE=$base" \
     -t "$DAEMONBUS_PAUSE_IMAGE" ops/pause >"$LOG" 2>&1; then
  cat "$LOG" >&2
  exit 1
fi
say "images ready in $(( $(now) - T0 )) s: $DAEMONBUS_IMAGE, $DAEMONBUS_PAUSE_IMAGE" \
    "(base $base)"
