#!/usr/bin/env bash
# Smoke test of scripts/demo (run by scripts/test): it starts, a schedule fires in both agents, the
# control plane answers through Caddy with TLS and makes a code, and SIGTERM stops every process it
# started. Needs scripts/setup and built binaries (scripts/test builds them first).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
demo_dir="$work/demo"
out="$work/demo.out"
bin="${CARGO_TARGET_DIR:-$root/target}/debug"
demo_pid=
device_pids=()

fail() {
  echo "demo smoke test: $*" >&2
  echo "--- demo output ---" >&2
  cat "$out" >&2 || true
  for log in "$demo_dir"/logs/*.log "$work"/*.out; do
    [ -f "$log" ] && { echo "--- $(basename "$log") (last lines) ---" >&2; tail -n 15 "$log" >&2; }
  done
  exit 1
}
cleanup() {
  if [ ${#device_pids[@]} -gt 0 ]; then kill "${device_pids[@]}" 2>/dev/null || true; fi
  if [ -n "$demo_pid" ]; then kill -KILL -- "-$demo_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out waiting for $what"
    sleep 0.2
  done
}

# Its own process group, so "no process left" can be checked for everything it started.
DEMO_DIR="$demo_dir" DEMO_NO_BUILD=1 DEMO_TICK=500ms setsid "$root/scripts/demo" >"$out" 2>&1 &
demo_pid=$!
deadline=$((SECONDS + 90))
until grep -q '^demo: ready' "$out"; do
  kill -0 "$demo_pid" 2>/dev/null || fail "the demo exited before it was ready"
  [ "$SECONDS" -lt "$deadline" ] || fail "timed out waiting for the demo to be ready"
  sleep 0.2
done

export SWARM_CONTROLLER_SOCKET="$demo_dir/swarm-controller/controller.sock"
"$bin/swarmctl" schedule add --name smoke --agent alpha --agent beta --body 'smoke test prompt' --every 1h >/dev/null \
  || fail "swarmctl schedule add failed"
for agent in alpha beta; do
  wait_for "$agent's turn" 30 grep -q 'smoke test prompt' "$demo_dir/agents/$agent/turns.log"
done
echo "a schedule fired in both agents"

url=$(sed -n 's/^demo: control plane: 3 copies behind Caddy at \(https:[^ ]*\) .*/\1/p' "$out")
[ -n "$url" ] || fail "the demo did not print the control plane's address"
curl -sf --cacert "$demo_dir/control/proxy.crt" "$url/readyz" >/dev/null \
  || fail "$url/readyz did not answer 200 through Caddy with the demo's certificate"
mapfile -t codes < <(grep -E '^hhcode1\.[A-Za-z0-9_-]+$' "$out")
[ ${#codes[@]} -eq 2 ] || fail "the demo printed ${#codes[@]} codes, not a window's and a host's"
echo "the control plane answers through Caddy with TLS and made two codes"

# A window and a host pair through Caddy (TLS with the pin the codes carry) and hold
# authenticated links. (A message between them needs both on one copy until the copies relay to
# each other, issue 5's peer links, so it is not part of this test yet.)
device_id() { sed -n 's/.*"device_id":"\([^"]*\)".*/\1/p'; }
window_id=$("$bin/agents-control" device pair "${codes[0]}" --identity "$work/window.id" --name window | device_id)
host_id=$("$bin/agents-control" device pair "${codes[1]}" --identity "$work/host.id" --name host | device_id)
if [ -z "$window_id" ] || [ -z "$host_id" ]; then fail "pairing did not print device ids"; fi
mkfifo "$work/host.in" "$work/window.in"
"$bin/agents-control" device connect --identity "$work/host.id" <"$work/host.in" >"$work/host.out" 2>&1 &
device_pids+=("$!")
exec 7>"$work/host.in"
"$bin/agents-control" device connect --identity "$work/window.id" <"$work/window.in" >"$work/window.out" 2>&1 &
device_pids+=("$!")
exec 8>"$work/window.in"
wait_for "the host's link" 20 grep -q '"event":"connected"' "$work/host.out"
wait_for "the window's link" 20 grep -q '"event":"connected"' "$work/window.out"
wait_for "the window's presence list" 20 grep -q '"event":"presence"' "$work/window.out"
exec 7>&- 8>&-
kill "${device_pids[@]}" 2>/dev/null || true
wait "${device_pids[@]}" 2>/dev/null || true
device_pids=()
echo "a window and a host paired through Caddy with the pin and hold authenticated links"

kill -TERM "$demo_pid"
wait_for "the demo to exit" 30 bash -c "! kill -0 $demo_pid 2>/dev/null"
left=$(pgrep -g "$demo_pid" || true)
[ -z "$left" ] || fail "processes left after the demo stopped: $(ps -o pid,args -p "$(echo "$left" | paste -sd,)")"
demo_pid=
device_pids=()
echo "SIGTERM stopped the demo and every process it started"
