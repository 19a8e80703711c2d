#!/usr/bin/env bash
# The two-instance demo: `./ci.sh --demo` starts a throwaway PostgreSQL and runs this.
# Alone, it needs POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER and POSTGRES_DB.
#
# Starts instances `a` and `b` of postgres-fanout on two free ports of 127.0.0.1, connects two
# curl SSE clients to each (one in room `red`, one in room `blue`), posts a message to each
# room (red's to a, blue's to b), prints what every client received (its room's message only)
# and each instance's /stats, then lets the clients go and shows that each instance closed its
# LISTEN connection. Last, a message is posted while nobody listens, and a client of `red`
# comes back to the other instance with `Last-Event-ID`: it gets that message from the table.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
: "${POSTGRES_HOST:?set POSTGRES_* (./ci.sh --demo does)}"

swift build --product postgres-fanout
bin="$(swift build --show-bin-path)/postgres-fanout"

work="$(mktemp -d "${TMPDIR:-/tmp}/postgres-fanout-demo.XXXXXX")"
pids=()
cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Waits up to 20 s for a command to succeed.
wait_for() {
    local i
    for i in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "demo: timed out waiting for: $*" >&2
    return 1
}

declare -A port
for name in a b; do
    port[$name]="$(free_port)"
    "$bin" --name "$name" --port "${port[$name]}" --heartbeat 1 >"$work/server-$name.log" 2>&1 &
    pids+=($!)
done
for name in a b; do wait_for curl -sf "http://127.0.0.1:${port[$name]}/stats"; done
echo "instances: a on http://127.0.0.1:${port[a]}, b on http://127.0.0.1:${port[b]}"

clients=()
for name in a b; do
    for room in red blue; do
        n=$((${#clients[@]} + 1))
        curl -sN "http://127.0.0.1:${port[$name]}/rooms/$room/events" >"$work/client$n-of-$name-in-$room.txt" &
        pids+=($!)
        clients+=("client$n-of-$name-in-$room")
    done
done
# `event: ready`: the instance's one LISTEN connection is in effect for this client.
for client in "${clients[@]}"; do wait_for grep -q "^event: ready" "$work/$client.txt"; done

curl -sf -X POST --data "hello red, from a" "http://127.0.0.1:${port[a]}/rooms/red/messages"
curl -sf -X POST --data "hello blue, from b" "http://127.0.0.1:${port[b]}/rooms/blue/messages"
for client in "${clients[@]}"; do wait_for grep -q "^data: hello ${client##*-in-}," "$work/$client.txt"; done

for client in "${clients[@]}"; do
    echo
    echo "== $client received (heartbeat comments left out):"
    grep -v '^:' "$work/$client.txt" | cat -s
done
for name in a b; do echo "GET /stats of $name: $(curl -sf "http://127.0.0.1:${port[$name]}/stats")"; done
echo "GET /rooms/red of a: $(curl -sf "http://127.0.0.1:${port[a]}/rooms/red")"
show_connections() {
    if command -v psql >/dev/null 2>&1; then
        echo "their connections in pg_stat_activity:"
        psql -X -h "$POSTGRES_HOST" -p "${POSTGRES_PORT:-5432}" -U "${POSTGRES_USER:-postgres}" -d "${POSTGRES_DB:-postgres}" -c \
            "SELECT application_name, state, query FROM pg_stat_activity WHERE application_name LIKE 'fanout-%' ORDER BY 1"
    fi
}
show_connections

echo
echo "the clients leave..."
for i in "${!pids[@]}"; do
    (( i >= 2 )) && kill "${pids[$i]}" 2>/dev/null || true
done
# An instance notices a departed client at its next heartbeat (every second here).
for name in a b; do
    wait_for bash -c "curl -sf http://127.0.0.1:${port[$name]}/stats | grep -q '\"listening\":false'"
    echo "GET /stats of $name: $(curl -sf "http://127.0.0.1:${port[$name]}/stats")"
done
show_connections

echo
# The id of the message red's client of a received: where a client that comes back resumes.
last_id="$(grep -m1 '^id: ' "$work/${clients[0]}.txt" | cut -d' ' -f2)"
curl -sf -X POST --data "posted to red while nobody listened" "http://127.0.0.1:${port[a]}/rooms/red/messages"
echo "== a client of red that saw message $last_id comes back, to b, with Last-Event-ID: $last_id:"
curl -sN -H "Last-Event-ID: $last_id" "http://127.0.0.1:${port[b]}/rooms/red/events" >"$work/returning.txt" &
returning=$!
wait_for grep -q "^data: posted to red while nobody listened" "$work/returning.txt"
kill "$returning" 2>/dev/null || true
grep -v '^:' "$work/returning.txt" | cat -s
