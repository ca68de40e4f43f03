// Package dashboard is backflow's view of what it sank into ClickHouse. Start with Panels (each
// panel's SQL and the columns it returns: the one source of truth) and Server (the built-in page
// and its JSON endpoints, `backflow dashboard`). GrafanaJSON turns Panels into the dashboard
// committed at deploy/grafana/dashboards/backflow.json.
//
// The panels read the rollups of internal/rollup: per-hour and per-minute rows, and the raw
// rows through FINAL from the rollups' watermark on. A re-written or replayed record counts
// once, and a panel answers what the per-minute views of migrations 0008 and 0014 answer,
// without reading the whole table. Their SQL uses the Grafana ClickHouse plugin's macros;
// Expand replaces them the way the plugin does, so the same text runs in Grafana, in the
// built-in page and in the tests. It runs on ClickHouse 18.16 and on current releases.
//
// The page (assets/, embedded with go:embed) is plain HTML, CSS and JavaScript that draws its
// charts as SVG itself: no charting library, no CDN and no build step, so `go build` on a fresh
// clone is all it takes.
package dashboard
