"""Feast definitions of the features backflow's sink-features writes to Redis.

backflow writes the online store directly (processors/features, sinks/redis); Feast only reads it. The file
sources are placeholders Feast requires for every feature view; nothing materializes from them.
Names and types must match processors/features/aggregate.go (RequestOp, TenantOp, UserOp, ModelOp).
"""

from datetime import timedelta

from feast import Entity, FeatureView, Field, FileSource, PushSource, ValueType
from feast.types import Array, Float32, Float64, Int64, String, UnixTimestamp

request = Entity(name="request", join_keys=["request_id"], value_type=ValueType.STRING,
                 description="One AI request (gateway requestId).")
tenant = Entity(name="tenant", join_keys=["tenant_id"], value_type=ValueType.STRING,
                description="A gateway tenant.")
# Users are scoped by tenant (the same user id in two tenants is two users): user_features has
# both entities, so its rows are keyed by the two join keys (tenant_id, user_id) and read with
# entity rows like {"tenant_id": "tenant-001", "user_id": "user-00001"}.
user = Entity(name="user", join_keys=["user_id"], value_type=ValueType.STRING,
              description="A gateway user id, unique within its tenant only.")
model = Entity(name="model", join_keys=["model"], value_type=ValueType.STRING,
               description="A model name as the gateway logs it.")


# Event-time windows (processors/features/window.go): the last hour in 5-minute buckets and the last
# day in 1-hour buckets, as of the row's last_seen (the entity's newest event time). A row keeps
# its values until the entity's next event; last_seen says how old they are.
WINDOWS = ["1h", "24h"]


def _windowed(features: list[tuple[str, object]]) -> list[Field]:
    return [Field(name=f"{name}_{w}", dtype=dtype) for w in WINDOWS for name, dtype in features]


_PARTY_WINDOWED = [("request_count", Int64), ("flagged_count", Int64), ("flagged_ratio", Float64), ("tokens", Int64)]
_MODEL_WINDOWED = [("request_count", Int64), ("error_count", Int64), ("latency_avg_ms", Float64),
                   ("latency_p95_ms", Int64), ("latency_max_ms", Int64)]


def _source(name: str) -> PushSource:
    batch = FileSource(name=f"{name}_batch", path=f"data/{name}.parquet",
                       timestamp_field="event_timestamp")
    return PushSource(name=f"{name}_push", batch_source=batch)


# Per request, written as records arrive. The Redis keys also carry a 7-day TTL set by the
# sink (Feast ignores key TTLs; this ttl is what Feast's offline reads would apply).
request_features = FeatureView(
    name="request_features",
    entities=[request],
    ttl=timedelta(days=7),
    schema=[
        Field(name="risk_score", dtype=Float32),
        Field(name="verdict", dtype=String),
        Field(name="categories", dtype=Array(String)),
        Field(name="latency_ms", dtype=Int64),
        Field(name="total_tokens", dtype=Int64),
        Field(name="model", dtype=String),
    ],
    online=True,
    source=_source("request_features"),
)

# Aggregates per tenant: all-time (since the sink's table first saw the tenant) and windowed.
tenant_features = FeatureView(
    name="tenant_features",
    entities=[tenant],
    ttl=timedelta(0),
    schema=[
        Field(name="request_count", dtype=Int64),
        Field(name="flagged_count", dtype=Int64),
        Field(name="flagged_ratio", dtype=Float64),
        Field(name="tokens", dtype=Int64),
        Field(name="last_seen", dtype=UnixTimestamp),
    ] + _windowed(_PARTY_WINDOWED),
    online=True,
    source=_source("tenant_features"),
)

# Aggregates per user of a tenant (entities tenant and user: join keys tenant_id, user_id).
user_features = FeatureView(
    name="user_features",
    entities=[tenant, user],
    ttl=timedelta(0),
    schema=[
        Field(name="request_count", dtype=Int64),
        Field(name="flagged_count", dtype=Int64),
        Field(name="flagged_ratio", dtype=Float64),
        Field(name="tokens", dtype=Int64),
        Field(name="last_seen", dtype=UnixTimestamp),
    ] + _windowed(_PARTY_WINDOWED),
    online=True,
    source=_source("user_features"),
)

# Aggregates per model: all-time and windowed. latency_p95_ms is an upper estimate from a fixed
# histogram (the bound of the bin holding the 95th percentile, capped at the max).
model_features = FeatureView(
    name="model_features",
    entities=[model],
    ttl=timedelta(0),
    schema=[
        Field(name="request_count", dtype=Int64),
        Field(name="error_count", dtype=Int64),
        Field(name="latency_avg_ms", dtype=Float64),
        Field(name="latency_max_ms", dtype=Int64),
        Field(name="latency_p95_ms", dtype=Int64),
        Field(name="last_seen", dtype=UnixTimestamp),
    ] + _windowed(_MODEL_WINDOWED),
    online=True,
    source=_source("model_features"),
)
