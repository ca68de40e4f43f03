# shellcheck shell=bash
# Shared helpers for deploy/local/stack: paths, ports, logging, process and readiness handling.
# Sourced, never run. Every path lives under $STACK_DIR (default: <repo>/.stack, git-ignored).

REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
LOCAL_DIR="$REPO_DIR/deploy/local"
STACK_DIR=${BACKFLOW_STACK_DIR:-"$REPO_DIR/.stack"}
# SECURE=1 (deploy/local/stack --secure) selects the secured stack: the same installs (jars,
# binaries) under $STACK_DIR, but its own state, logs, pids, ports and env file under
# $STACK_DIR/secure (lib/secure.sh).
# CLUSTER=1 (deploy/local/stack --cluster) selects the cluster stack (lib/cluster.sh), whose
# state, logs, pids and env file are under $STACK_DIR/cluster.
SECURE=${SECURE:-0}
CLUSTER=${CLUSTER:-0}
if [ "$SECURE" = 1 ]; then STATE_DIR="$STACK_DIR/secure"
elif [ "$CLUSTER" = 1 ]; then STATE_DIR="$STACK_DIR/cluster"
else STATE_DIR="$STACK_DIR"; fi
LOG_DIR="$STATE_DIR/logs"
RUN_DIR="$STATE_DIR/run"
ENV_FILE="$STATE_DIR/env"

# Ports: chosen away from each system's default so a system-wide install never collides.
# Broker i (1-based) of a multi-broker cluster uses BASE + (i-1)*100.
KAFKA_PORT=${BACKFLOW_KAFKA_PORT:-19092}
KAFKA_CONTROLLER_PORT=${BACKFLOW_KAFKA_CONTROLLER_PORT:-19093}
REGISTRY_PORT=${BACKFLOW_REGISTRY_PORT:-18081}
CLICKHOUSE_PORT=${BACKFLOW_CLICKHOUSE_PORT:-19000}
CLICKHOUSE_HTTP_PORT=${BACKFLOW_CLICKHOUSE_HTTP_PORT:-18123}
CLICKHOUSE_INTERSERVER_PORT=${BACKFLOW_CLICKHOUSE_INTERSERVER_PORT:-19009}
REDIS_PORT=${BACKFLOW_REDIS_PORT:-16379}
SENSITIVE_PORT=${BACKFLOW_SENSITIVE_WORDS_PORT:-18090}
PROMETHEUS_PORT=${BACKFLOW_PROMETHEUS_PORT:-19090} # the plain stack's only
HOST=127.0.0.1

# The secured stack's ports. Each defaults to a fixed offset from the plain port of the same
# system, so shifting the plain ports by a multiple of 1000 shifts these too, and their last
# three digits differ from every other port's (no collision under such shifts).
SECURE_KAFKA_PORT=${BACKFLOW_SECURE_KAFKA_PORT:-$((KAFKA_PORT + 4))}                        # 19096, SASL_SSL
SECURE_KAFKA_CONTROLLER_PORT=${BACKFLOW_SECURE_KAFKA_CONTROLLER_PORT:-$((KAFKA_CONTROLLER_PORT + 4))} # 19097, SSL
SECURE_REGISTRY_PORT=${BACKFLOW_SECURE_REGISTRY_PORT:-$((REGISTRY_PORT + 2))}               # 18083, the TLS + basic-auth proxy
SECURE_REGISTRY_BACKEND_PORT=${BACKFLOW_SECURE_REGISTRY_BACKEND_PORT:-$((REGISTRY_PORT + 3))} # 18084, Apicurio behind it
SECURE_CLICKHOUSE_PORT=${BACKFLOW_SECURE_CLICKHOUSE_PORT:-$((CLICKHOUSE_PORT + 440))}       # 19440, secure native
SECURE_REDIS_PORT=${BACKFLOW_SECURE_REDIS_PORT:-$((REDIS_PORT + 1))}                        # 16380, tls-port
SECURE_SENSITIVE_PORT=${BACKFLOW_SECURE_SENSITIVE_PORT:-$((SENSITIVE_PORT + 5))}            # 18095, https
SECURE_OAUTH_PORT=${BACKFLOW_SECURE_OAUTH_PORT:-$((REGISTRY_PORT + 6))}                    # 18087, the OIDC test server
if [ "$SECURE" = 1 ]; then
  KAFKA_PORT=$SECURE_KAFKA_PORT
  KAFKA_CONTROLLER_PORT=$SECURE_KAFKA_CONTROLLER_PORT
  REGISTRY_PORT=$SECURE_REGISTRY_PORT
  CLICKHOUSE_PORT=$SECURE_CLICKHOUSE_PORT
  REDIS_PORT=$SECURE_REDIS_PORT
  SENSITIVE_PORT=$SECURE_SENSITIVE_PORT
fi

# How long a service may take to answer its readiness probe, in seconds. The secured stack
# gets twice as long by default: it is a second set of JVMs, and TLS on every internal link.
READY_TIMEOUT=${BACKFLOW_READY_TIMEOUT:-$([ "$SECURE" = 1 ] && echo 240 || echo 120)}

log() { printf '%s stack: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }

mkdir -p "$LOG_DIR" "$RUN_DIR"

# apt_install PKG... installs Debian packages that are not installed yet. 'apt-get update' runs
# at most once per stack dir, since a fresh machine's package lists may be empty or stale.
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get to install them"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if [ ! -f "$STACK_DIR/.apt-updated" ]; then
    log "apt-get update (once)"
    $sudo apt-get update -qq >"$LOG_DIR/apt.log" 2>&1 || die "apt-get update failed; see $LOG_DIR/apt.log"
    touch "$STACK_DIR/.apt-updated"
  fi
  log "installing ${missing[*]} from Debian's packages"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >>"$LOG_DIR/apt.log" 2>&1 || die "apt-get install ${missing[*]} failed; see $LOG_DIR/apt.log"
}

# pid_of NAME prints the pid recorded for NAME if that process is still alive.
pid_of() {
  local f="$RUN_DIR/$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && { echo "$pid"; return 0; }
  return 1
}

# start_bg NAME CMD... starts CMD detached (own session, survives the caller), logs to
# $LOG_DIR/NAME.log and records its pid.
start_bg() {
  local name=$1; shift
  setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN_DIR/$name.pid"
}

# stop_pid NAME... stops the recorded processes together: SIGTERM to all, then SIGKILL to any
# still alive after 30 s. Together matters for a Kafka cluster: nodes stopped one by one lose
# their controller quorum and the last one cannot shut down cleanly.
stop_pid() {
  local name pid pids=() names=() i alive
  for name in "$@"; do
    if pid=$(pid_of "$name"); then
      log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid"); names+=("$name")
    fi
    rm -f "$RUN_DIR/$name.pid"
  done
  for i in $(seq 1 60); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && return 0
    sleep 0.5
  done
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      log "${names[$i]} did not stop in 30 s; killing"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
  sleep 0.5
}

# wait_ready NAME PROBE... runs PROBE until it succeeds. On timeout, or when the process dies,
# it fails with the service's log tail so the reason is on screen.
wait_ready() {
  local name=$1; shift
  local deadline=$((SECONDS + READY_TIMEOUT))
  while ! "$@" >/dev/null 2>&1; do
    if ! pid_of "$name" >/dev/null; then
      tail -n 30 "$LOG_DIR/$name.log" >&2 || true
      die "$name exited during start-up; log: $LOG_DIR/$name.log"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 30 "$LOG_DIR/$name.log" >&2 || true
      die "$name not ready after ${READY_TIMEOUT}s (probe: $*); log: $LOG_DIR/$name.log"
    fi
    sleep 1
  done
}

# port_free PORT succeeds when nothing listens on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# require_port_free NAME PORT fails with a clear message when another program holds PORT.
require_port_free() {
  port_free "$2" || die "port $2 for $1 is taken by another program; set BACKFLOW_*_PORT to move it ($(ss -ltnpH "sport = :$2" 2>/dev/null | awk '{print $NF}' | head -1))"
}

# sha_of FILE... prints one hash over the files, to tell when an install must be redone.
sha_of() { cat "$@" | sha256sum | cut -c1-16; }
