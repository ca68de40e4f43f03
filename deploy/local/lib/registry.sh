# shellcheck shell=bash
# The schema registry: Apicurio Registry 2.4.2.Final, re-packaged from Maven Central by
# deploy/local/registry/pom.xml, storing schemas in an H2 file under $STACK_DIR/registry/data so
# ids survive restarts. backflow uses its Confluent-compatible API at /apis/ccompat/v7.
# (Karapace, the first choice, is not on PyPI; see README "Schema registry".)

REGISTRY_HOME="$STATE_DIR/registry" # data
REGISTRY_VERSION=2.4.2.Final
REGISTRY_BUILD="$STACK_DIR/registry/build" # shared by the plain and the secured stack
REGISTRY_JAR="$REGISTRY_BUILD/apicurio-registry-runner-$REGISTRY_VERSION-runner.jar"
# In secured mode Apicurio listens on a loopback port of its own, and our authproxy
# (deploy/local/authproxy) serves REGISTRY_PORT with TLS and basic auth in front of it:
# Apicurio 2.4 authenticates only through Keycloak, which the stack cannot run.
REGISTRY_BACKEND_PORT=$REGISTRY_PORT
[ "$SECURE" = 1 ] && REGISTRY_BACKEND_PORT=$SECURE_REGISTRY_BACKEND_PORT
AUTHPROXY_BIN="$STACK_DIR/bin/authproxy"

registry_url() {
  if [ "$SECURE" = 1 ]; then echo "https://$HOST:$REGISTRY_PORT/apis/ccompat/v7"; else echo "http://$HOST:$REGISTRY_PORT/apis/ccompat/v7"; fi
}

registry_install() {
  local stamp
  stamp=$(sha_of "$LOCAL_DIR/registry/pom.xml" "$LOCAL_DIR/registry/src/main/resources/application.properties")
  [ -f "$REGISTRY_JAR" ] && [ "$(cat "$REGISTRY_BUILD/.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  command -v java >/dev/null || apt_install openjdk-17-jre-headless
  command -v mvn >/dev/null || apt_install maven
  log "building Apicurio Registry $REGISTRY_VERSION from Maven Central jars (deploy/local/registry/pom.xml)"
  mkdir -p "$REGISTRY_BUILD"
  mvn -B -q -f "$LOCAL_DIR/registry/pom.xml" package -DskipTests \
    -Dregistry.build.dir="$REGISTRY_BUILD" >"$LOG_DIR/registry-install.log" 2>&1 \
    || { tail -n 20 "$LOG_DIR/registry-install.log" >&2; die "building the registry failed; see $LOG_DIR/registry-install.log"; }
  echo "$stamp" >"$REGISTRY_BUILD/.stamp"
}

# authproxy_install builds the proxy when it is missing or its source changed.
authproxy_install() {
  local stamp
  stamp=$(cd "$REPO_DIR" && cat deploy/local/authproxy/main.go go.mod go.sum | sha256sum | cut -c1-16)
  [ -x "$AUTHPROXY_BIN" ] && [ "$(cat "$AUTHPROXY_BIN.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  command -v go >/dev/null || die "Go is needed to build deploy/local/authproxy (go not found on PATH)"
  log "building authproxy (go build ./deploy/local/authproxy)"
  mkdir -p "$STACK_DIR/bin"
  (cd "$REPO_DIR" && go build -o "$AUTHPROXY_BIN" ./deploy/local/authproxy) >"$LOG_DIR/authproxy-build.log" 2>&1 \
    || { tail -n 20 "$LOG_DIR/authproxy-build.log" >&2; die "building authproxy failed; see $LOG_DIR/authproxy-build.log"; }
  echo "$stamp" >"$AUTHPROXY_BIN.stamp"
}

# registry_curl ARGS... runs curl against the registry; in secured mode with the stack's CA
# and the basic-auth user from a curl config file (-K), so the password is not on the command line.
registry_curl() {
  if [ "$SECURE" = 1 ]; then
    local k="$SECRETS_DIR/registry.curlrc"
    [ -f "$k" ] || printf 'user = "%s:%s"\n' "$SECURE_USER" "$(secret registry-password)" | private_file "$k"
    curl --cacert "$TLS_DIR/ca.crt" -K "$k" "$@"
  else
    curl "$@"
  fi
}

# registry_probe asks for the list of subjects: a real request through the ccompat API.
registry_probe() {
  registry_curl -fsS --max-time 3 "$(registry_url)/subjects" >/dev/null
}

# registry_backend_probe asks Apicurio itself (secured mode, behind the proxy).
registry_backend_probe() {
  curl -fsS --max-time 3 "http://$HOST:$REGISTRY_BACKEND_PORT/apis/ccompat/v7/subjects" >/dev/null
}

registry_up() {
  if pid_of registry >/dev/null; then
    [ "$SECURE" = 1 ] && ! pid_of registry-proxy >/dev/null && registry_proxy_up
    wait_ready registry registry_probe
    return 0
  fi
  registry_install
  mkdir -p "$REGISTRY_HOME/data"
  require_port_free registry "$REGISTRY_BACKEND_PORT"
  [ "$SECURE" = 1 ] && require_port_free registry-proxy "$REGISTRY_PORT"
  log "starting schema registry (Apicurio $REGISTRY_VERSION) on $HOST:$REGISTRY_BACKEND_PORT"
  # Small-footprint JVM flags: ~160 MB RSS, ready in ~3 s. WRITE_DELAY=0 makes H2 write each
  # registration through, so a killed registry never hands out an id twice.
  start_bg registry java -Xmx128m -XX:+UseSerialGC -XX:MaxMetaspaceSize=128m -XX:ReservedCodeCacheSize=48m \
    -Xss512k -XX:TieredStopAtLevel=1 \
    -Dquarkus.http.host="$HOST" -Dquarkus.http.port="$REGISTRY_BACKEND_PORT" \
    -Dquarkus.datasource.jdbc.url="jdbc:h2:file:$REGISTRY_HOME/data/registry;DB_CLOSE_ON_EXIT=FALSE;WRITE_DELAY=0" \
    -Dquarkus.datasource.jdbc.initial-size=2 -Dquarkus.datasource.jdbc.min-size=2 -Dquarkus.datasource.jdbc.max-size=10 \
    -jar "$REGISTRY_JAR"
  if [ "$SECURE" = 1 ]; then
    wait_ready registry registry_backend_probe
    registry_proxy_up
  fi
  wait_ready registry registry_probe
  log "schema registry ready: $(registry_url)"
}

# registry_proxy_up starts authproxy on REGISTRY_PORT: TLS with the stack's certificate, basic
# auth for the stack's user (credentials file 0600), and bearer tokens of audience "registry"
# from the stack's OIDC test server (lib/oauth.sh), forwarding to Apicurio.
registry_proxy_up() {
  authproxy_install
  local creds="$SECRETS_DIR/registry.credentials"
  printf '%s:%s\n' "$SECURE_USER" "$(secret registry-password)" | private_file "$creds"
  log "starting authproxy on $HOST:$REGISTRY_PORT (TLS, basic auth, bearer tokens) in front of the registry"
  start_bg registry-proxy "$AUTHPROXY_BIN" --listen "$HOST:$REGISTRY_PORT" --upstream "http://$HOST:$REGISTRY_BACKEND_PORT" \
    --tls-cert-file "$TLS_DIR/server.crt" --tls-key-file "$TLS_DIR/server.key" --credentials-file "$creds" \
    --oidc-issuer "$(oauth_issuer_url)" --oidc-audience registry
  wait_ready registry-proxy registry_probe
}

registry_down() { stop_pid registry-proxy registry; }

registry_status() {
  local state=stopped
  pid_of registry >/dev/null && state="running (pid $(pid_of registry))"
  if [ "$SECURE" = 1 ]; then
    pid_of registry-proxy >/dev/null || state="$state, proxy stopped"
    pid_of registry-proxy >/dev/null && state="$state, proxy pid $(pid_of registry-proxy)"
  fi
  printf '%-12s %-28s %s\n' registry "$HOST:$REGISTRY_PORT" "$state"
}

# registry_running succeeds when the registry (and in secured mode its proxy) runs.
registry_running() { pid_of registry >/dev/null && { [ "$SECURE" != 1 ] || pid_of registry-proxy >/dev/null; }; }
