# shellcheck shell=bash
# scripts/lib/processes.sh — starting and stopping the servers the benchmark scripts run.
# Source it; it defines functions only.

# Stops `pid`: SIGTERM, up to `tenths` tenths of a second (default 150) to exit — kvq serve
# finishes in-flight requests first — then SIGKILL. Reaps it if it is this shell's child.
stop_process() {
  local pid="$1" tenths="${2:-150}"
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq "$tenths"); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null || true
}

# Starts `kvq serve --listen 127.0.0.1:0 ARGS...` in the background with stdout in `out` and
# stderr in `err`, and waits for its start line. Sets server_pid and server_url
# ("http://127.0.0.1:PORT"); on failure prints both files and returns 1.
start_kvq_serve() {
  local kvq="$1" out="$2" err="$3" line
  shift 3
  "$kvq" serve --listen 127.0.0.1:0 "$@" >"$out" 2>"$err" &
  server_pid=$!
  server_url=""
  for _ in $(seq 300); do
    kill -0 "$server_pid" 2>/dev/null || break
    # The HTTP line; with --beanstalk-listen the listener's own start line comes first.
    line="$(grep -m 1 '^kvq serve: listening on ' "$out" 2>/dev/null || true)"
    server_url="$(printf '%s\n' "$line" | sed -n 's|^kvq serve: listening on \(http://[^ ]*\) .*|\1|p')"
    [ -n "$server_url" ] && return 0
    sleep 0.05
  done
  echo "kvq serve did not start:" >&2
  cat "$out" "$err" >&2
  return 1
}

# Waits up to 10 s for something to listen on 127.0.0.1:`port`.
wait_for_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}
