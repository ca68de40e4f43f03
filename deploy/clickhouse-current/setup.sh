#!/usr/bin/env bash
# Builds a Python venv with a pinned chDB (current ClickHouse as an in-process engine) under the
# stack folder and prints the path of its python. Tests run backflow's migrations, rendered for
# this engine's version, through it (deploy/clickhouse-current/run.py): the local stack's
# ClickHouse is 18.16, and no registry here serves a current ClickHouse server binary.
#
#   deploy/clickhouse-current/setup.sh     # idempotent; reuses a complete venv
#
# Env: BACKFLOW_STACK_DIR (default <repo>/.stack), BACKFLOW_CHDB_PYTHON (default python3).
set -euo pipefail

# chdb-core 26.9.0 embeds ClickHouse 26.9 (SELECT version() = 26.9.2.1). It is the engine
# package alone; the "chdb" package adds pandas and pyarrow on top, which nothing here needs.
CHDB_VERSION=26.9.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
stack="${BACKFLOW_STACK_DIR:-$root/.stack}"
venv="$stack/chdb-venv"
py="${BACKFLOW_CHDB_PYTHON:-python3}"

marker="$venv/.chdb-core-$CHDB_VERSION"
if [[ ! -f "$marker" ]]; then
  echo "setup: building $venv with chdb-core==$CHDB_VERSION (about 300 MB download)" >&2
  start=$(date +%s)
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "chdb-core==$CHDB_VERSION"
  "$venv/bin/python" -c "import chdb; print(chdb.query('SELECT version()', 'CSV'), end='')" >&2
  touch "$marker"
  echo "setup: venv ready in $(( $(date +%s) - start ))s" >&2
fi
echo "$venv/bin/python"
