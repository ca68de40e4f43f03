// Package dlq is backflow's dead-letter topic: the conventions every stage follows when it
// gives up on a record, a Writer that produces DLQ records, Decode that reads them back, and
// Redrive that turns an entry into the record to re-produce to its origin topic. Start with
// Writer (stages) or Decode and Redrive (operators' tools, `backflow dlq`).
//
// # When a record goes to the DLQ
//
// Only for a property of the record itself: not in the Confluent wire format, an unknown
// schema id, a corrupt or truncated body, an invalid or oversized record. An outage (registry,
// ClickHouse, Redis, Kafka unreachable) is retried with backoff and never written here.
//
// # The DLQ record
//
// Operators, the ClickHouse mirror and re-drives rely on this layout. A DLQ record carries the
// bad record's raw key and value, byte for byte (a null key or value stays null), and its
// original headers, followed by these headers; all values are UTF-8 strings:
//
//	backflow.origin.topic      topic the bad record was read from
//	backflow.origin.partition  its partition, decimal
//	backflow.origin.offset     its offset, decimal
//	backflow.origin.timestamp  its timestamp, ms since the Unix epoch, decimal; -1 if unknown
//	backflow.error.stage       the stage that gave up, e.g. "ingest", "sink-clickhouse"
//	backflow.error.class       short snake_case class, e.g. "not_framed", "unknown_schema",
//	                           "corrupt", "invalid", "oversized"; "unknown" when the error
//	                           has none (see Classified, ClassOf)
//	backflow.error.message     err.Error(), as valid UTF-8, URL passwords replaced by "***",
//	                           cut to at most 1 KiB (MaxMessageLen) ending in "…"
//	backflow.error.time        when the stage gave up, RFC 3339 with milliseconds, UTC
//	backflow.error.truncated   only when the value had to be cut to fit MaxMessageBytes:
//	                           the original value's length in bytes, decimal
//
// The message is err.Error() verbatim apart from the above: errors that reach a Writer must not
// carry secrets.
//
// Original headers whose names start with "backflow.origin." or "backflow.error." are dropped
// before ours are added, so a re-driven record that fails again gets one fresh set, not two.
// Every other original header is kept, in order, before ours.
//
// The record's key is the raw key, so the DLQ is partitioned like any keyed topic; its
// timestamp is the time of the write. The same bad record can appear twice when a write timed
// out after the broker stored it and the stage retried; (origin topic, partition, offset)
// identifies the bad record.
//
// # Re-drive
//
// A re-drive re-produces the raw key, value and original headers to the origin topic, to the
// origin partition, and adds
//
//	backflow.redrive.from   <dlq topic>/<partition>/<offset> of the DLQ entry
//	backflow.redrive.time   when it was re-driven, RFC 3339 with milliseconds, UTC
//	backflow.redrive.count  the previous backflow.redrive.count + 1; 1 if absent
//
// replacing any earlier backflow.redrive.* headers and dropping backflow.origin.* and
// backflow.error.*. An entry whose value was truncated is not re-driven (ErrTruncated): the
// full record is still at its origin offset while retention keeps it.
//
// # Delivery
//
// Writer.Write returns only after the broker acknowledged the DLQ record (acks=all, idempotent
// producer). A stage commits the bad record's source offset only after that; when Write fails
// the stage retries and must not commit.
//
// The default topic is "backflow.dlq" (Config.Topic). The topic is created by the operator or
// by backflow's setup like every other topic; brokers do not create topics automatically.
package dlq
