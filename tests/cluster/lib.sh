# Shared by tests/cluster/up, down and ctl. Sourced, not run.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib/common.sh"

CLUSTER_DIR_DEFAULT="${FULCRUM_CLUSTER_DIR:-/tmp/fulcrum-cluster}"

# A port on 127.0.0.1 that nothing listens on right now (why from below the ephemeral range:
# scripts/lib/free_port.py). tests/cluster/up still guards against a port lost to another
# cluster started at the same moment.
free_port() { /usr/bin/python3 "$FULCRUM_ROOT/scripts/lib/free_port.py"; }

port_busy() {  # port_busy PORT: true when something accepts connections on it
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start_component DIR NAME: runs DIR/cmd/NAME (written by up) in the background,
# logging to DIR/logs/NAME.log, and records its pid. ctl uses it for restarts.
start_component() {
  local dir=$1 name=$2
  setsid bash "$dir/cmd/$name" >>"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$name.pid"
}

# stop_component DIR NAME [SIGNAL]: stops one component and waits until it is gone.
stop_component() {
  local dir=$1 name=$2 signal=${3:-TERM} pidfile="$1/pids/$2.pid" pid
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$signal" -- "-$pid" 2>/dev/null || kill "-$signal" "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# wait_until SECONDS COMMAND...: polls COMMAND until it succeeds; false on timeout.
# COMMAND runs in this shell, so it may exit the script itself (fail fast when a
# component died); it is responsible for its own output.
wait_until() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.3
  done
}
