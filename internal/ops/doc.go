// Package ops is what every backflow process serves to its operators: the metric families
// all stages share (Metrics, and a per-stage view of it, Stage), the HTTP endpoints /metrics,
// /healthz and /readyz (Server, fed by Readiness), and structured logging (NewLogger).
//
// Metrics are registered on a registry the caller passes in, never on the global one, so a
// test builds its own registry and asserts on values. Every Stage method is safe on a nil
// *Stage and does nothing: code that runs without metrics (unit tests, library use) passes nil.
package ops
