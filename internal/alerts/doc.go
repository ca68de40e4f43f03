// Package alerts reads the alerts a Prometheus server has active, from its /api/v1/alerts:
// backflow dashboard shows the firing ones. Conn is the config section prometheus; New builds
// a Client from it, and Client.Firing is the call a reader needs.
package alerts
