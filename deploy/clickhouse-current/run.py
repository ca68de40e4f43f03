"""Runs SQL on a current ClickHouse engine in-process (chDB) and prints the results as JSON.

    echo '{"session": "/tmp/db", "statements": ["SELECT version()"]}' \
      | .stack/chdb-venv/bin/python deploy/clickhouse-current/run.py

Each statement runs in order in one chDB session whose data lives in "session" (a folder; it
persists between runs). The output is {"version": ..., "results": [...]}, one entry per
statement: the rows of a query as lists (JSONCompact's "data"), or [] for DDL and inserts. The
first failing statement stops the run with exit 1 and {"error": ..., "statement": i}.
"""

import json
import sys

import chdb
from chdb import session as chs


def main() -> None:
    req = json.load(sys.stdin)
    sess = chs.Session(req["session"])
    results = []
    try:
        for i, stmt in enumerate(req["statements"]):
            try:
                res = sess.query(stmt, "JSONCompact")
            except Exception as e:  # chDB raises its own error type with the server message
                json.dump({"error": str(e), "statement": i}, sys.stdout)
                sys.exit(1)
            text = res.bytes().decode() if res is not None else ""
            results.append(json.loads(text)["data"] if text.strip() else [])
        version = sess.query("SELECT version()", "CSV").bytes().decode().strip().strip('"')
    finally:
        sess.close()
    json.dump({"version": version, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
