// Package processors holds backflow's goka processor groups (ingest: decode, validate, dedupe by
// requestId, moderation, DLQ). Each group exports its goka GroupGraph and a constructor; the
// wiring into a runnable pipeline lives in package pipelines. The Kafka settings every group
// runs with (sarama protocol version, topic-manager replication, builders) come from
// internal/kafka.Config.ProcessorOptions.
package processors
