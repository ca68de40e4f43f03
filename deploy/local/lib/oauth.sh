# shellcheck shell=bash
# The OIDC test server of the secured stack: no.nav.security:mock-oauth2-server, from Maven
# Central jars (deploy/local/oauth/pom.xml), on loopback over HTTP. It runs beside the secured
# Kafka node (started before it, stopped with it), whose OAUTHBEARER mechanism validates tokens
# against the server's JWKS. Issuer "backflow" (deploy/local/oauth/config.json) issues tokens by
# the client credentials grant, any client id and secret accepted, each living 120 s (so the
# brokers' re-authentication and the clients' refresh happen within a test): the token's
# audience is the scope asked for (the brokers want "kafka"), and scope "kafka-expired" gets a
# token that expired in 2001, for tests of refusals.

OAUTH_LIBS="$STACK_DIR/oauth/libs" # shared install, like Kafka's jars
OAUTH_PORT=$SECURE_OAUTH_PORT # lib/common.sh

oauth_issuer_url() { echo "http://$HOST:$OAUTH_PORT/backflow"; }
oauth_token_url() { echo "$(oauth_issuer_url)/token"; }
oauth_jwks_url() { echo "$(oauth_issuer_url)/jwks"; }

oauth_install() {
  local stamp
  stamp=$(sha_of "$LOCAL_DIR/oauth/pom.xml")
  [ -f "$OAUTH_LIBS/.stamp" ] && [ "$(cat "$OAUTH_LIBS/.stamp")" = "$stamp" ] && return 0
  command -v java >/dev/null || apt_install openjdk-17-jre-headless
  command -v mvn >/dev/null || apt_install maven
  log "resolving mock-oauth2-server from Maven Central (deploy/local/oauth/pom.xml)"
  rm -rf "$OAUTH_LIBS"
  mvn -B -q -f "$LOCAL_DIR/oauth/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$OAUTH_LIBS" >"$LOG_DIR/oauth-install.log" 2>&1 \
    || { tail -n 20 "$LOG_DIR/oauth-install.log" >&2; die "Maven could not resolve mock-oauth2-server; see $LOG_DIR/oauth-install.log"; }
  echo "$stamp" >"$OAUTH_LIBS/.stamp"
}

# oauth_probe succeeds when the JWKS answers with a key.
oauth_probe() { curl -fsS --max-time 3 "$(oauth_jwks_url)" | grep -q '"kid"'; }

oauth_up() {
  if pid_of oauth >/dev/null; then
    wait_ready oauth oauth_probe
    return 0
  fi
  oauth_install
  require_port_free oauth "$OAUTH_PORT"
  log "starting the OIDC test server on $(oauth_issuer_url)"
  # JSON_CONFIG carries the mapping file's content (no secret in it).
  SERVER_HOSTNAME=$HOST SERVER_PORT=$OAUTH_PORT JSON_CONFIG="$(cat "$LOCAL_DIR/oauth/config.json")" \
    start_bg oauth java -Xmx128m -Djava.awt.headless=true -cp "$OAUTH_LIBS/*" \
    no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt
  wait_ready oauth oauth_probe
}

oauth_down() { stop_pid oauth; }

oauth_status() {
  local state
  if pid_of oauth >/dev/null; then state="running (pid $(pid_of oauth))"; else state="stopped"; fi
  printf '%-12s %-28s %s\n' oauth "$HOST:$OAUTH_PORT" "$state"
}
