// Package features is the feature processor: a goka group that folds enriched records into
// per-request, tenant, user and model features and hands them, as rows in Feast's Redis
// layout, to a Store (sinks/redis.Writer). Start with Processor.Graph for its topology and
// Run for its lifecycle; the stage that runs it with the Redis writer is sink-features.
package features
