#!/usr/bin/env bash
# Builds a Python venv with a pinned Feast (Redis online store) under the stack folder and runs
# `feast apply` for the backflow feature repo against the stack's Redis.
#
#   deploy/feast/setup.sh            # venv + feast apply (idempotent; reuses a complete venv)
#   deploy/feast/setup.sh --venv-only
#
# Env: BACKFLOW_FEAST_PROJECT (default: the yaml's "backflow"; tests use private projects),
# BACKFLOW_STACK_DIR (default <repo>/.stack), BACKFLOW_REDIS_ADDR (default from .stack/env,
# else 127.0.0.1:16379), BACKFLOW_REDIS_MODE=cluster with BACKFLOW_REDIS_ADDRS (the seeds,
# comma-separated) for a Redis Cluster (redis_type: redis_cluster), BACKFLOW_FEAST_PYTHON
# (default python3), BACKFLOW_FEAST_REPO_DIR (where the rendered repo goes; default
# $STACK/feast-repo).
set -euo pipefail

# The pinned Feast version. internal/feast/layout.go follows this version's
# sdk/python/feast/infra/online_stores/redis.py and key_encoding_utils.py; change both together.
FEAST_VERSION=0.67.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
stack="${BACKFLOW_STACK_DIR:-$root/.stack}"
venv="$stack/feast-venv"
py="${BACKFLOW_FEAST_PYTHON:-python3}"
repo="${BACKFLOW_FEAST_REPO_DIR:-$stack/feast-repo}"

if [[ -z "${BACKFLOW_REDIS_ADDR:-}" && -f "$stack/env" ]]; then
  BACKFLOW_REDIS_ADDR="$(sed -n 's/^BACKFLOW_REDIS_ADDR=//p' "$stack/env" | tail -1)"
fi
redis="${BACKFLOW_REDIS_ADDR:-127.0.0.1:16379}"
redis_type=redis
if [[ "${BACKFLOW_REDIS_MODE:-single}" == cluster ]]; then
  # Feast's Redis Cluster client takes the seeds comma-separated in connection_string.
  [[ -n "${BACKFLOW_REDIS_ADDRS:-}" ]] || { echo "setup: BACKFLOW_REDIS_MODE=cluster needs BACKFLOW_REDIS_ADDRS" >&2; exit 2; }
  redis="$BACKFLOW_REDIS_ADDRS"
  redis_type=redis_cluster
fi

marker="$venv/.feast-$FEAST_VERSION"
if [[ ! -f "$marker" ]]; then
  echo "setup: building $venv with feast[redis]==$FEAST_VERSION" >&2
  start=$(date +%s)
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip
  "$venv/bin/pip" install --quiet --disable-pip-version-check "feast[redis]==$FEAST_VERSION"
  "$venv/bin/python" -c "import feast, sys; assert feast.__version__ == '$FEAST_VERSION', feast.__version__"
  touch "$marker"
  echo "setup: venv ready in $(( $(date +%s) - start ))s" >&2
fi
[[ "${1:-}" == "--venv-only" ]] && exit 0

# Render the feature repo with this stack's Redis; the checked-in yaml keeps the default address.
mkdir -p "$repo/data"
cp "$here/features.py" "$repo/features.py"
project_sed=""
if [[ -n "${BACKFLOW_FEAST_PROJECT:-}" ]]; then
  project_sed="s#^project: .*#project: ${BACKFLOW_FEAST_PROJECT}#"
fi
sed -e "s#connection_string: .*#connection_string: \"$redis\"#" -e "s#redis_type: .*#redis_type: $redis_type#" \
  ${project_sed:+-e "$project_sed"} \
  "$here/feature_store.yaml" >"$repo/feature_store.yaml"
# Feast wants the batch source file to exist only when materializing; keep a placeholder path.
cd "$repo"
FEAST_USAGE=False "$venv/bin/feast" apply >&2
echo "$repo"
