"""Reads online features through Feast's own SDK and prints them as JSON.

    echo '{"features": ["tenant_features:request_count"], "entity_rows": [{"tenant_id": "t1"}]}' \
      | .stack/feast-venv/bin/python deploy/feast/read_online.py .stack/feast-repo

Prints get_online_features(...).to_dict(); datetimes become Unix seconds.
"""

import datetime
import json
import sys

from feast import FeatureStore


def _default(v):
    if isinstance(v, datetime.datetime):
        return v.timestamp()
    return str(v)


def main() -> None:
    req = json.load(sys.stdin)
    store = FeatureStore(repo_path=sys.argv[1])
    resp = store.get_online_features(features=req["features"], entity_rows=req["entity_rows"])
    json.dump(resp.to_dict(), sys.stdout, default=_default)


if __name__ == "__main__":
    main()
