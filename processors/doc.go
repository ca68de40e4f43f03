// Package processors is the home of backflow's goka processor groups, one sub-package each:
// processors/ingest (decode, validate, dedupe by requestId, batch moderation, DLQ) and
// processors/features (aggregates for the feature store). Each group exports its goka
// GroupGraph (Processor.Graph) so a reader sees its topology in one place, and a Run that wires
// it to the cluster. The Kafka settings every group runs with (sarama protocol version,
// topic-manager replication, builders) come from internal/kafka.Conn.ProcessorOptions.
package processors
