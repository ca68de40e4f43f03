"""Feast definitions of the features backflow's sink-features writes to Redis.

backflow writes the online store directly (sinks/features); Feast only reads it. The file
sources are placeholders Feast requires for every feature view; nothing materializes from them.
Names and types must match sinks/features/aggregate.go (RequestOp, TenantOp, UserOp, ModelOp).
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

# All-time aggregates per tenant (since the sink's table first saw the tenant).
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
    ],
    online=True,
    source=_source("tenant_features"),
)

# All-time aggregates per user of a tenant (entities tenant and user: join keys tenant_id, user_id).
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
    ],
    online=True,
    source=_source("user_features"),
)

# All-time aggregates per model.
model_features = FeatureView(
    name="model_features",
    entities=[model],
    ttl=timedelta(0),
    schema=[
        Field(name="request_count", dtype=Int64),
        Field(name="error_count", dtype=Int64),
        Field(name="latency_avg_ms", dtype=Float64),
        Field(name="latency_max_ms", dtype=Int64),
    ],
    online=True,
    source=_source("model_features"),
)
