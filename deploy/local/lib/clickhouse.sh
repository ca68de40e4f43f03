# shellcheck shell=bash
# ClickHouse server from Debian's package (18.16 on these machines), started from a copy of the
# package's config.xml with every path and port rewritten into $STACK_DIR/clickhouse.

CH_HOME="$STACK_DIR/clickhouse"

clickhouse_install() {
  command -v clickhouse-server >/dev/null && command -v clickhouse-client >/dev/null && return 0
  apt_install clickhouse-server clickhouse-client
}

clickhouse_write_config() {
  local src=/etc/clickhouse-server
  [ -f "$src/config.xml" ] || die "$src/config.xml not found; is Debian's clickhouse-server installed?"
  mkdir -p "$CH_HOME/data" "$CH_HOME/tmp" "$CH_HOME/user_files" "$CH_HOME/format_schemas"
  # Only the top-level <path> is ours; the one inside <distributed_ddl> is a ZooKeeper path.
  sed -e "s#<log>.*</log>#<log>$LOG_DIR/clickhouse.log</log>#" \
      -e "s#<errorlog>.*</errorlog>#<errorlog>$LOG_DIR/clickhouse.err.log</errorlog>#" \
      -e "s#<level>[a-z]*</level>#<level>information</level>#" \
      -e "s#<http_port>[0-9]*</http_port>#<http_port>$CLICKHOUSE_HTTP_PORT</http_port>#" \
      -e "s#<tcp_port>[0-9]*</tcp_port>#<tcp_port>$CLICKHOUSE_PORT</tcp_port>#" \
      -e "s#<interserver_http_port>[0-9]*</interserver_http_port>#<interserver_http_port>$CLICKHOUSE_INTERSERVER_PORT</interserver_http_port>#" \
      -e "s#<path>/var/lib/clickhouse/</path>#<path>$CH_HOME/data/</path>#" \
      -e "s#<tmp_path>.*</tmp_path>#<tmp_path>$CH_HOME/tmp/</tmp_path>#" \
      -e "s#<user_files_path>.*</user_files_path>#<user_files_path>$CH_HOME/user_files/</user_files_path>#" \
      -e "s#<format_schema_path>.*</format_schema_path>#<format_schema_path>$CH_HOME/format_schemas/</format_schema_path>#" \
      -e "s#<listen_host>::1</listen_host>##" \
      -e "s#<!-- <timezone>.*</timezone> -->#<timezone>UTC</timezone>#" \
      -e "s#<mark_cache_size>[0-9]*</mark_cache_size>#<mark_cache_size>536870912</mark_cache_size>#" \
      "$src/config.xml" >"$CH_HOME/config.xml"
  cp "$src/users.xml" "$CH_HOME/users.xml"
  grep -q "<tcp_port>$CLICKHOUSE_PORT</tcp_port>" "$CH_HOME/config.xml" \
    || die "could not rewrite $src/config.xml (unexpected layout)"
}

clickhouse_probe() {
  [ "$(clickhouse-client --host "$HOST" --port "$CLICKHOUSE_PORT" -q 'SELECT 1' 2>/dev/null)" = 1 ]
}

clickhouse_up() {
  pid_of clickhouse >/dev/null && { wait_ready clickhouse clickhouse_probe; return 0; }
  clickhouse_install
  clickhouse_write_config
  require_port_free clickhouse "$CLICKHOUSE_PORT"
  require_port_free "clickhouse http" "$CLICKHOUSE_HTTP_PORT"
  log "starting ClickHouse on $HOST:$CLICKHOUSE_PORT (native), $HOST:$CLICKHOUSE_HTTP_PORT (http)"
  start_bg clickhouse clickhouse-server --config-file="$CH_HOME/config.xml"
  wait_ready clickhouse clickhouse_probe
  log "ClickHouse ready: $(clickhouse-client --host "$HOST" --port "$CLICKHOUSE_PORT" -q 'SELECT version()')"
}

clickhouse_down() { stop_pid clickhouse; }

clickhouse_status() {
  local state=stopped
  pid_of clickhouse >/dev/null && state="running (pid $(pid_of clickhouse))"
  printf '%-12s %-28s %s\n' clickhouse "$HOST:$CLICKHOUSE_PORT" "$state"
}
