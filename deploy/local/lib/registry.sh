# shellcheck shell=bash
# The schema registry: Apicurio Registry 2.4.2.Final, re-packaged from Maven Central by
# deploy/local/registry/pom.xml, storing schemas in an H2 file under $STACK_DIR/registry/data so
# ids survive restarts. backflow uses its Confluent-compatible API at /apis/ccompat/v7.
# (Karapace, the first choice, is not on PyPI; see README "Schema registry".)

REGISTRY_HOME="$STACK_DIR/registry"
REGISTRY_VERSION=2.4.2.Final
REGISTRY_JAR="$REGISTRY_HOME/build/apicurio-registry-runner-$REGISTRY_VERSION-runner.jar"

registry_url() { echo "http://$HOST:$REGISTRY_PORT/apis/ccompat/v7"; }

registry_install() {
  local stamp
  stamp=$(sha_of "$LOCAL_DIR/registry/pom.xml" "$LOCAL_DIR/registry/src/main/resources/application.properties")
  [ -f "$REGISTRY_JAR" ] && [ "$(cat "$REGISTRY_HOME/build/.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  command -v java >/dev/null || apt_install openjdk-17-jre-headless
  command -v mvn >/dev/null || apt_install maven
  log "building Apicurio Registry $REGISTRY_VERSION from Maven Central jars (deploy/local/registry/pom.xml)"
  mkdir -p "$REGISTRY_HOME"
  mvn -B -q -f "$LOCAL_DIR/registry/pom.xml" package -DskipTests \
    -Dregistry.build.dir="$REGISTRY_HOME/build" >"$LOG_DIR/registry-install.log" 2>&1 \
    || { tail -n 20 "$LOG_DIR/registry-install.log" >&2; die "building the registry failed; see $LOG_DIR/registry-install.log"; }
  echo "$stamp" >"$REGISTRY_HOME/build/.stamp"
}

# registry_probe asks for the list of subjects: a real request through the ccompat API.
registry_probe() {
  curl -fsS --max-time 3 "$(registry_url)/subjects" >/dev/null
}

registry_up() {
  pid_of registry >/dev/null && { wait_ready registry registry_probe; return 0; }
  registry_install
  mkdir -p "$REGISTRY_HOME/data"
  require_port_free registry "$REGISTRY_PORT"
  log "starting schema registry (Apicurio $REGISTRY_VERSION) on $HOST:$REGISTRY_PORT"
  # Small-footprint JVM flags: ~160 MB RSS, ready in ~3 s. WRITE_DELAY=0 makes H2 write each
  # registration through, so a killed registry never hands out an id twice.
  start_bg registry java -Xmx128m -XX:+UseSerialGC -XX:MaxMetaspaceSize=128m -XX:ReservedCodeCacheSize=48m \
    -Xss512k -XX:TieredStopAtLevel=1 \
    -Dquarkus.http.host="$HOST" -Dquarkus.http.port="$REGISTRY_PORT" \
    -Dquarkus.datasource.jdbc.url="jdbc:h2:file:$REGISTRY_HOME/data/registry;DB_CLOSE_ON_EXIT=FALSE;WRITE_DELAY=0" \
    -Dquarkus.datasource.jdbc.initial-size=2 -Dquarkus.datasource.jdbc.min-size=2 -Dquarkus.datasource.jdbc.max-size=10 \
    -jar "$REGISTRY_JAR"
  wait_ready registry registry_probe
  log "schema registry ready: $(registry_url)"
}

registry_down() { stop_pid registry; }

registry_status() {
  local state=stopped
  pid_of registry >/dev/null && state="running (pid $(pid_of registry))"
  printf '%-12s %-28s %s\n' registry "$HOST:$REGISTRY_PORT" "$state"
}
