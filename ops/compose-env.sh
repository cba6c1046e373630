#!/usr/bin/env bash
# Secrets of the compose cluster: one Redis password per role, and the Redis ACL file.
#
#   bash ops/compose-env.sh          create .env if missing, then (re)write ops/redis/users.acl
#
# DAEMONBUS_COMPOSE_ENV and DAEMONBUS_ACL_FILE name other files than .env and users.acl (the
# tests render a cluster of their own).
#
# .env (top of the repo, mode 600, never committed) holds DAEMONBUS_REDIS_PASSWORD_<ROLE> for
# the roles admin, health, cli, apiserver, watcher, reconciler, status-writer, gc, node-agent
# and node-admission;
# docker-compose reads it to build each service's DAEMONBUS_REDIS_URL. An existing .env is
# kept (add a missing password by deleting its line). ops/redis/users.acl is generated from
# ops/redis/users.acl.in with the SHA-256 of each password (no password in it) and the key
# pattern of DAEMONBUS_PREFIX (from the environment, else .env, else "daemonbus"); Redis
# loads it at start, so run `docker-compose restart redis` after changing either.
set -euo pipefail
cd "$(dirname "$0")/.."

ENV_FILE=${DAEMONBUS_COMPOSE_ENV:-.env}
TEMPLATE=ops/redis/users.acl.in
ACL_FILE=${DAEMONBUS_ACL_FILE:-ops/redis/users.acl}
ROLES="ADMIN HEALTH CLI APISERVER WATCHER RECONCILER STATUS_WRITER GC NODE_AGENT NODE_ADMISSION"

new_password() {
  # 32 random bytes as hex: URL-safe, so it goes into redis://user:password@host as it is.
  od -An -tx1 -N32 /dev/urandom | tr -d ' \n'
}

umask 077
touch "$ENV_FILE"
chmod 600 "$ENV_FILE"
for role in $ROLES; do
  var="DAEMONBUS_REDIS_PASSWORD_$role"
  if ! grep -q "^$var=" "$ENV_FILE"; then
    echo "$var=$(new_password)" >>"$ENV_FILE"
    echo "compose-env: generated $var in $ENV_FILE"
  fi
done

value_of() {  # value_of VAR: its value in $ENV_FILE (last one wins, as for docker-compose)
  grep "^$1=" "$ENV_FILE" | tail -n 1 | cut -d= -f2-
}

prefix=${DAEMONBUS_PREFIX:-$(value_of DAEMONBUS_PREFIX || true)}
prefix=${prefix:-daemonbus}
case "$prefix" in
  *[!A-Za-z0-9_.-]*) echo "compose-env: DAEMONBUS_PREFIX must be [A-Za-z0-9_.-]+" >&2; exit 1 ;;
esac

script=(-e '/^#/d' -e '/^[[:space:]]*$/d' -e "s/@KEYS@/~{$prefix}:*/g" -e "s/@TAG@/{$prefix}/g")
for role in $ROLES; do
  hash=$(printf %s "$(value_of "DAEMONBUS_REDIS_PASSWORD_$role")" | sha256sum | cut -d' ' -f1)
  script+=(-e "s/@HASH_$role@/$hash/g")
done
# SHA-1 of each of the project's Lua scripts the ACL names (+evalsha|<sha1>), read from the
# scripts module itself (plain Python, no dependencies)
while read -r name sha; do
  script+=(-e "s/@SHA_$name@/$sha/g")
done < <(python3 - <<'PY'
import hashlib, runpy
scripts = runpy.run_path("shared/store/scripts.py")
for name in ("COMMIT", "SNAPSHOT", "NEWER_POSITION", "ENSURE_EPOCH", "RENEW_LEASES"):
    print(name, hashlib.sha1(scripts[name].encode()).hexdigest())
PY
)
umask 022
tmp="$ACL_FILE.tmp.$$"
sed "${script[@]}" "$TEMPLATE" >"$tmp"
if grep -q '@[A-Z_]*@' "$tmp"; then
  echo "compose-env: unreplaced placeholder in $TEMPLATE:" >&2
  grep -o '@[A-Z_]*@' "$tmp" >&2
  rm -f "$tmp"
  exit 1
fi
# Readable by the Redis user in the container; it holds only hashes of the passwords.
chmod 644 "$tmp"
mv "$tmp" "$ACL_FILE"
echo "compose-env: wrote $ACL_FILE (key prefix {$prefix})"
