# shellcheck shell=bash
# The sensitive-word service: our own binary (tools/sensitive-words/cmd/sensitive-words), built from this checkout
# into $STACK_DIR/bin and run on the harmless sample dictionary deploy/sensitive-words/sample.tsv.
# The stack's service name is sensitive-words; its functions are sensitive_words_*.

SENSITIVE_BIN="$STACK_DIR/bin/sensitive-words"
SENSITIVE_DICT="$REPO_DIR/deploy/sensitive-words/sample.tsv"

sensitive_words_url() {
  if [ "$SECURE" = 1 ]; then echo "https://$HOST:$SENSITIVE_PORT"; else echo "http://$HOST:$SENSITIVE_PORT"; fi
}

# sensitive_words_curl ARGS... runs curl against the service; in secured mode with the stack's
# CA and the bearer token from a curl config file (-K), so the token is not on the command line.
sensitive_words_curl() {
  if [ "$SECURE" = 1 ]; then
    local k="$SECRETS_DIR/sensitive-words.curlrc"
    [ -f "$k" ] || printf 'header = "Authorization: Bearer %s"\n' "$(secret sensitive-token)" | private_file "$k"
    curl --cacert "$TLS_DIR/ca.crt" -K "$k" "$@"
  else
    curl "$@"
  fi
}

# sensitive_words_stamp hashes what the binary is built from: the service's Go sources (found
# with find, so new files count before they are committed) and go.mod/go.sum.
sensitive_words_stamp() {
  (
    cd "$REPO_DIR" || exit 1
    find tools/sensitive-words -type f -name '*.go' ! -name '*_test.go' -print0 \
      | sort -z | xargs -0 sha256sum
    sha256sum go.mod go.sum
  ) | sha256sum | cut -c1-16
}

# sensitive_words_install builds the binary when it is missing or its sources changed.
sensitive_words_install() {
  local stamp
  stamp=$(sensitive_words_stamp)
  [ -x "$SENSITIVE_BIN" ] && [ "$(cat "$SENSITIVE_BIN.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  command -v go >/dev/null || die "Go is needed to build the sensitive-word service (go not found on PATH)"
  log "building sensitive-words (go build ./tools/sensitive-words/cmd/sensitive-words)"
  mkdir -p "$STACK_DIR/bin"
  (cd "$REPO_DIR" && go build -o "$STACK_DIR/bin/sensitive-words" ./tools/sensitive-words/cmd/sensitive-words) \
    >"$LOG_DIR/sensitive-words-build.log" 2>&1 \
    || { tail -n 20 "$LOG_DIR/sensitive-words-build.log" >&2; die "building sensitive-words failed; see $LOG_DIR/sensitive-words-build.log"; }
  echo "$stamp" >"$SENSITIVE_BIN.stamp"
}

# sensitive_words_probe checks a real batch: a spaced-out sample word must come back as a hit.
sensitive_words_probe() {
  sensitive_words_curl -fsS --max-time 3 -H 'Content-Type: application/json' \
    -d '{"items":[{"id":"stack-probe","text":"stack probe: b l u e f i n"}]}' \
    "$(sensitive_words_url)/v1/check" | grep -q '"word":"bluefin"'
}

sensitive_words_up() {
  if pid_of sensitive-words >/dev/null; then
    wait_ready sensitive-words sensitive_words_probe
    [ "$(cat "$SENSITIVE_BIN.stamp" 2>/dev/null)" = "$(sensitive_words_stamp)" ] \
      || log "note: sensitive-words runs an older build; 'deploy/local/stack down sensitive-words' then 'up' rebuilds it"
    return 0
  fi
  sensitive_words_install
  [ -f "$SENSITIVE_DICT" ] || die "sample dictionary $SENSITIVE_DICT not found"
  require_port_free sensitive-words "$SENSITIVE_PORT"
  log "starting sensitive-words on $HOST:$SENSITIVE_PORT (dictionary $SENSITIVE_DICT)"
  if [ "$SECURE" = 1 ]; then
    start_bg sensitive-words "$SENSITIVE_BIN" --addr "$HOST:$SENSITIVE_PORT" --dictionary "$SENSITIVE_DICT" \
      --token-file "$(secret_file sensitive-token)" --tls-cert-file "$TLS_DIR/server.crt" --tls-key-file "$TLS_DIR/server.key"
  else
    start_bg sensitive-words "$SENSITIVE_BIN" --addr "$HOST:$SENSITIVE_PORT" --dictionary "$SENSITIVE_DICT"
  fi
  wait_ready sensitive-words sensitive_words_probe
  log "sensitive-words ready: $(sensitive_words_url) $(sensitive_words_curl -fsS --max-time 3 "$(sensitive_words_url)/healthz")"
}

sensitive_words_down() { stop_pid sensitive-words; }

sensitive_words_status() {
  local state=stopped
  pid_of sensitive-words >/dev/null && state="running (pid $(pid_of sensitive-words))"
  # The name is wider than the column; shorten the address column so STATE stays aligned.
  printf '%s %-25s %s\n' sensitive-words "$HOST:$SENSITIVE_PORT" "$state"
}
