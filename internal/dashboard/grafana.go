package dashboard

import (
	"bytes"
	"encoding/json"
)

// Grafana names: the plugin, and the data source the provisioning file creates.
const (
	GrafanaPluginID      = "grafana-clickhouse-datasource"
	GrafanaDatasourceUID = "backflow-clickhouse"
	GrafanaDashboardUID  = "backflow"
	// GrafanaJSONPath is where the generated dashboard is committed, from the repository root.
	GrafanaJSONPath = "deploy/grafana/dashboards/backflow.json"
)

type obj = map[string]any

// grafanaUnits maps a panel's Unit to Grafana's unit ids.
var grafanaUnits = map[string]string{"": "short", "ms": "ms", "%": "percent", "s": "s", "tokens": "short", "rows/s": "short"}

// aheadOfClock names the columns whose negative value means events dated after the server's
// clock, not a lag: Grafana shows such a value as the page does ("ahead of the clock"), in
// orange, instead of a raw negative number of seconds.
var aheadOfClock = map[string]bool{"event_lag_s": true}

// grafanaOverrides are a panel's field overrides: a value mapping for each column of
// aheadOfClock it has.
func grafanaOverrides(p Panel) []any {
	overrides := []any{}
	for _, c := range p.Columns {
		if !aheadOfClock[c] {
			continue
		}
		overrides = append(overrides, obj{
			"matcher": obj{"id": "byName", "options": c},
			"properties": []any{obj{"id": "mappings", "value": []any{obj{"type": "range", "options": obj{
				"from": -1e12, "to": -0.5,
				"result": obj{"text": "ahead of the clock (events dated after now)", "color": "orange", "index": 0}}}}}},
		})
	}
	return overrides
}

// GrafanaJSON renders Panels as a Grafana dashboard for the grafana-clickhouse-datasource plugin
// (v4): one row per section, a time series, bar chart, table or stat panel per Panel, each with
// its SQL as a raw SQL target. The data source is a dashboard variable that defaults to the
// provisioned backflow-clickhouse. The output is deterministic (map keys sorted), so the
// committed file can be checked against it.
func GrafanaJSON() ([]byte, error) {
	ds := obj{"type": GrafanaPluginID, "uid": "${datasource}"}
	var panels []any
	id, y, x, rowH := 1, 0, 0, 0
	section := ""
	for _, p := range Panels {
		if p.Section != section {
			section = p.Section
			if x > 0 {
				y, x = y+rowH, 0
			}
			panels = append(panels, obj{"type": "row", "id": id, "title": section, "collapsed": false,
				"gridPos": obj{"h": 1, "w": 24, "x": 0, "y": y}, "panels": []any{}})
			id++
			y++
			rowH = 0
		}
		h := 8
		if p.Kind == Stat {
			h = 4
		}
		if x+p.Width > 24 {
			y, x, rowH = y+rowH, 0, 0
		}
		format, queryType := 1, "table"
		if p.Kind == TimeSeries {
			format, queryType = 0, "timeseries"
		}
		gp := obj{
			"id": id, "title": p.Title, "description": p.Help, "datasource": ds,
			"gridPos": obj{"h": h, "w": p.Width, "x": x, "y": y},
			"targets": []any{obj{"datasource": ds, "editorType": "sql", "format": format, "queryType": queryType,
				"rawSql": p.SQL, "refId": "A"}},
			"fieldConfig": obj{"defaults": obj{"unit": grafanaUnits[p.Unit]}, "overrides": grafanaOverrides(p)},
		}
		switch p.Kind {
		case TimeSeries:
			gp["type"] = "timeseries"
			gp["interval"] = "1m" // the rollups are per minute: no narrower bucket
			gp["options"] = obj{"legend": obj{"displayMode": "list", "placement": "bottom", "showLegend": true},
				"tooltip": obj{"mode": "multi", "sort": "desc"}}
		case Bars:
			gp["type"] = "barchart"
			gp["options"] = obj{"orientation": "horizontal", "xField": p.Columns[0], "showValue": "auto",
				"legend": obj{"showLegend": false, "displayMode": "list", "placement": "bottom"}}
		case Table:
			gp["type"] = "table"
			gp["options"] = obj{"showHeader": true}
		case Stat:
			gp["type"] = "stat"
			gp["options"] = obj{"reduceOptions": obj{"calcs": []any{"lastNotNull"}, "fields": "", "values": false},
				"colorMode": "value", "graphMode": "none", "textMode": "value"}
		}
		panels = append(panels, gp)
		id++
		x += p.Width
		rowH = max(rowH, h)
	}
	d := obj{
		"uid":           GrafanaDashboardUID,
		"title":         "backflow",
		"description":   "What backflow sank into ClickHouse: traffic, latency, tokens, moderation, dead letters, freshness and replays. Generated from internal/dashboard/panels.go; do not edit by hand.",
		"tags":          []any{"backflow", "clickhouse"},
		"editable":      true,
		"schemaVersion": 39,
		"version":       1,
		"refresh":       "30s",
		"time":          obj{"from": "now-6h", "to": "now"},
		"timezone":      "utc",
		"panels":        panels,
		"annotations":   obj{"list": []any{}},
		"templating": obj{"list": []any{obj{
			"name": "datasource", "label": "ClickHouse", "type": "datasource", "query": GrafanaPluginID,
			"current": obj{"text": "backflow ClickHouse", "value": GrafanaDatasourceUID}, "hide": 0, "refresh": 1,
		}}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the SQL's <, > and & readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
