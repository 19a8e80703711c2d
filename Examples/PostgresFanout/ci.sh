#!/usr/bin/env bash
# Builds Examples/PostgresFanout and runs its tests against a throwaway PostgreSQL server:
#
#   1. installs PostgreSQL with apt-get if its binaries are not found (needs root);
#   2. builds the package and its tests (fails on a compiler warning in this package);
#   3. creates a cluster in a temporary folder (initdb as the `postgres` user when run as
#      root), starts it on 127.0.0.1 and a free port only, with trust authentication (the
#      cluster is thrown away), and creates the role and database `fanout`;
#   4. runs `swift test` with POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER and POSTGRES_DB set;
#   5. always stops the server and removes the folder, on failure too.
#
# Usage: Examples/PostgresFanout/ci.sh          (from anywhere; CI runs it with CI=true)
#        Examples/PostgresFanout/ci.sh --demo   (the same server, then demo.sh instead of the tests)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../.ci/lib.sh"
cd "$here"
mode="${1:-test}"
ci_begin "Examples/PostgresFanout"

say() { printf '[postgres-fanout ci %3ds] %s\n' "$((SECONDS - CI_STARTED))" "$*"; }

# --- 1. PostgreSQL's binaries ------------------------------------------------------------
find_postgres_bin() {
    local dir
    if command -v initdb >/dev/null 2>&1; then
        dir="$(dirname "$(readlink -f "$(command -v initdb)")")"
        if [[ -x "$dir/pg_ctl" && -x "$dir/postgres" ]]; then
            printf '%s\n' "$dir"
            return 0
        fi
    fi
    # Debian and Ubuntu keep them out of PATH, one folder per major version: take the newest.
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then
        printf '%s\n' "$dir"
        return 0
    fi
    return 1
}

ci_step "PostgreSQL's binaries"
if ! pg_bin="$(find_postgres_bin)"; then
    say "PostgreSQL not found: installing it with apt-get"
    if [[ $EUID -ne 0 ]]; then
        echo "ci.sh: PostgreSQL is not installed and this is not root: apt-get install postgresql first" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Only the binaries are wanted, not the default cluster that the package would create and
    # start on port 5432 (a drop-in file: createcluster.conf itself belongs to the package).
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/postgres-fanout-ci.conf
    apt-get update
    apt-get install -y --no-install-recommends postgresql
    pg_bin="$(find_postgres_bin)" || { echo "ci.sh: no initdb after installing postgresql" >&2; exit 1; }
fi
say "PostgreSQL binaries: $pg_bin ($("$pg_bin/postgres" --version))"

# --- 2. build ------------------------------------------------------------------------------
if [[ "$mode" != "--demo" ]]; then
    # The first build of postgres-nio and hummingbird takes minutes.
    ci_step "swift build --build-tests"
    swift build --build-tests 2>&1 | tee "$CI_LOGS/build.log"
    # Warnings in this package's own sources fail the run (not those of the dependencies).
    ci_no_warnings "$CI_LOGS/build.log" "$here"
fi

# --- 3. a throwaway cluster ------------------------------------------------------------------
tmp="$(mktemp -d "${TMPDIR:-/tmp}/postgres-fanout-db.XXXXXX")"
server_started=0
as_owner() {
    # initdb and postgres refuse to run as root: run them as `postgres`, who owns the folder.
    if [[ $EUID -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
stop_and_remove_cluster() {
    if [[ $server_started -eq 1 ]]; then
        as_owner "$pg_bin/pg_ctl" -D "$tmp/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [[ $CI_EXIT_STATUS -ne 0 && -f "$tmp/server.log" ]]; then
        echo "---- the PostgreSQL server's log (last 40 lines) ----" >&2
        tail -n 40 "$tmp/server.log" >&2 || true
    fi
    rm -rf "$tmp"
}
ci_on_exit stop_and_remove_cluster
ci_step "a throwaway cluster"

if [[ $EUID -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir "$tmp" --shell /usr/sbin/nologin postgres
    chown postgres: "$tmp"
fi
chmod 700 "$tmp"

# A free port on 127.0.0.1: bind to port 0 and see which one the kernel gives.
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

say "initdb in $tmp/data, server on 127.0.0.1:$port"
as_owner "$pg_bin/initdb" -D "$tmp/data" -U postgres --auth=trust --encoding=UTF8 --no-locale --no-sync >"$tmp/initdb.log" 2>&1 \
    || { cat "$tmp/initdb.log" >&2; exit 1; }
server_started=1
as_owner "$pg_bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 60 \
    -o "-p $port -k $tmp -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null

psql=("$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres)
"${psql[@]}" -c "CREATE ROLE fanout LOGIN" -c "CREATE DATABASE fanout OWNER fanout"

export POSTGRES_HOST=127.0.0.1 POSTGRES_PORT="$port" POSTGRES_USER=fanout POSTGRES_DB=fanout
say "PostgreSQL $("${psql[@]}" -At -c 'SHOW server_version') ready: POSTGRES_HOST=$POSTGRES_HOST POSTGRES_PORT=$POSTGRES_PORT POSTGRES_USER=$POSTGRES_USER POSTGRES_DB=$POSTGRES_DB"

# --- 4. tests, or the demo -------------------------------------------------------------------
if [[ "$mode" == "--demo" ]]; then
    ci_step "demo.sh"
    bash "$here/demo.sh"
else
    ci_step "swift test"
    # The tests take seconds; the timeout is a hang guard far above that.
    timeout --kill-after=10 300 swift test --skip-build 2>&1 | tee "$CI_LOGS/test.log"
    ci_tests_passed "$CI_LOGS/test.log"
fi
ci_end
