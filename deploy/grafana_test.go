package deploy

// These tests hold the Grafana dashboards (grafana/dashboards, provisioned into the compose
// stack) to the code: one per service Prometheus scrapes and one of the SLOs; every panel's
// query parses with Prometheus's PromQL parser and reads only series the binaries serve (or
// the rules record), with labels they have; every panel names its datasource through the
// dashboard's variable; and the runbook's section of every alert names panels that exist.

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const dashboardsDir = "deploy/grafana/dashboards"

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *datasourceRef `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasourceRef  `json:"datasource"`
}

type dashboard struct {
	file          string
	UID           string `json:"uid"`
	Title         string `json:"title"`
	ID            *int   `json:"id"`
	SchemaVersion int    `json:"schemaVersion"`
	Editable      bool   `json:"editable"`
	Links         []struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"links"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// allPanels returns the dashboard's panels, those of collapsed rows included, rows left out.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dashboardsDir, "*.json"))
	require.NoError(t, err)
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var d dashboard
		require.NoError(t, json.Unmarshal(b, &d), f)
		d.file = filepath.Base(f)
		out[d.file] = d
	}
	return out
}

// One dashboard per service Prometheus scrapes, named after its job, and one of the SLOs;
// each links to the others.
func TestDashboardsAreOnePerServiceAndTheSLOs(t *testing.T) {
	t.Parallel()
	c, err := LoadPrometheusConfig(root)
	require.NoError(t, err)
	want := []string{"overview.json"}
	for _, j := range c.ScrapeConfigs {
		want = append(want, j.JobName+".json")
	}
	ds := loadDashboards(t)
	require.ElementsMatch(t, want, slices.Collect(maps.Keys(ds)), "the dashboards of %s", dashboardsDir)

	uids, titles := map[string]string{}, map[string]string{}
	for f, d := range ds {
		stem := strings.TrimSuffix(f, ".json")
		assert.Equal(t, "walletsaga-"+stem, d.UID, "%s: uid (its address, /d/<uid>)", f)
		assert.Nil(t, d.ID, "%s: no database id: Grafana gives one", f)
		assert.Positive(t, d.SchemaVersion, "%s: schemaVersion", f)
		assert.False(t, d.Editable, "%s: provisioned read-only; change the JSON here", f)
		if stem != "overview" {
			assert.Equal(t, "walletsaga: "+stem, d.Title, "%s: title", f)
		}
		assert.NotContains(t, titles, d.Title, "%s: title taken by %s", f, titles[d.Title])
		titles[d.Title], uids[d.UID] = f, f
	}
	for f, d := range ds {
		var linked []string
		for _, l := range d.Links {
			uid, ok := strings.CutPrefix(l.URL, "/d/")
			if assert.True(t, ok, "%s: link %s is to a dashboard", f, l.URL) {
				assert.Contains(t, uids, uid, "%s: link %s", f, l.URL)
				linked = append(linked, uid)
			}
		}
		for uid, other := range uids {
			if other != f {
				assert.Contains(t, linked, uid, "%s links to %s", f, other)
			}
		}
	}
}

// Every panel has a title (the runbook names panels by it), a description, a place on the
// grid and queries of the dashboard's Prometheus datasource variable, so the dashboards work
// against any Prometheus, not only the compose stack's.
func TestDashboardPanelsAreComplete(t *testing.T) {
	t.Parallel()
	for f, d := range loadDashboards(t) {
		vars := map[string]variable{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v
		}
		dsVar, ok := vars["datasource"]
		require.True(t, ok, "%s: a datasource variable", f)
		assert.Equal(t, "datasource", dsVar.Type, "%s", f)
		assert.JSONEq(t, `"prometheus"`, string(dsVar.Query), "%s: the datasource variable lists Prometheus datasources", f)
		want := datasourceRef{Type: "prometheus", UID: "${datasource}"}

		ids, titles := map[int]bool{}, map[string]bool{}
		for _, p := range d.Panels {
			if p.Type == "row" {
				assert.Empty(t, p.Targets, "%s: row %q queries nothing", f, p.Title)
				require.False(t, ids[p.ID], "%s: panel id %d twice", f, p.ID)
				ids[p.ID] = true
			}
		}
		for _, p := range d.allPanels() {
			what := f + ": panel " + p.Title
			require.NotEmpty(t, p.Title, "%s: a panel without a title", f)
			assert.False(t, titles[p.Title], "%s: title twice", what)
			titles[p.Title] = true
			assert.False(t, ids[p.ID], "%s: id %d twice", what, p.ID)
			ids[p.ID] = true
			assert.NotEmpty(t, p.Description, "%s: description", what)
			if assert.NotNil(t, p.Datasource, "%s: datasource", what) {
				assert.Equal(t, want, *p.Datasource, "%s: datasource", what)
			}
			assert.Positive(t, p.GridPos.W, "%s: width", what)
			assert.Positive(t, p.GridPos.H, "%s: height", what)
			assert.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "%s: within the grid's 24 columns", what)
			require.NotEmpty(t, p.Targets, "%s: queries", what)
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				assert.NotEmpty(t, tg.Expr, "%s: query %s", what, tg.RefID)
				assert.False(t, refs[tg.RefID], "%s: refId %s twice", what, tg.RefID)
				refs[tg.RefID] = true
				if tg.Datasource != nil {
					assert.Equal(t, want, *tg.Datasource, "%s: query %s's datasource", what, tg.RefID)
				}
			}
		}
		for _, v := range d.Templating.List {
			if v.Type == "query" && assert.NotNil(t, v.Datasource, "%s: variable %s's datasource", f, v.Name) {
				assert.Equal(t, want, *v.Datasource, "%s: variable %s's datasource", f, v.Name)
			}
		}
	}
}

// Grafana's variables in a query: ${name}, ${name:format}, $name, [[name]].
var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// grafanaBuiltins are the interval variables Grafana fills in, with a value to parse with.
var grafanaBuiltins = map[string]string{"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}

// expand replaces Grafana's variables in expr (built-in intervals, the dashboard's own) by a
// value PromQL parses, and reports any other.
func expand(expr string, vars map[string]variable) (string, []string) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(ref string) string {
		m := grafanaVar.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if v, ok := grafanaBuiltins[name]; ok {
			return v
		}
		if _, ok := vars[name]; ok {
			return "var_" + name
		}
		unknown = append(unknown, ref)
		return ref
	})
	return out, unknown
}

// labelValues is a query variable's label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// Every panel's query, and every variable's, reads only series the binaries serve (or the
// rules record, or Prometheus writes), with labels those have: a renamed metric or label
// fails here, not on a dashboard gone blank.
func TestDashboardQueriesReadWhatTheBinariesServe(t *testing.T) {
	t.Parallel()
	k := knownSeries(loadRules(t))
	for f, d := range loadDashboards(t) {
		vars := map[string]variable{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			var q struct {
				Query string `json:"query"`
			}
			require.NoError(t, json.Unmarshal(v.Query, &q), "%s: variable %s's query", f, v.Name)
			m := labelValues.FindStringSubmatch(q.Query)
			require.NotNil(t, m, "%s: variable %s: label_values(selector, label), not %q", f, v.Name, q.Query)
			require.Empty(t, k.problems(m[1]), "%s: variable %s: %s", f, v.Name, q.Query)
			name := strings.TrimSpace(m[1])
			if i := strings.IndexAny(name, "{["); i >= 0 {
				name = name[:i]
			}
			s, _ := k.lookup(name)
			assert.Contains(t, s, m[2], "%s: variable %s: %s has no label %s", f, v.Name, name, m[2])
		}
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				expr, unknown := expand(tg.Expr, vars)
				assert.Empty(t, unknown, "%s: panel %q, query %s: variables the dashboard does not define", f, p.Title, tg.RefID)
				assert.Empty(t, k.problems(expr), "%s: panel %q, query %s: %s", f, p.Title, tg.RefID, tg.Expr)
			}
		}
	}
}

// runbookPanel is a link to a dashboard's panel in the runbook: [<dashboard title> ›
// <panel title>](../deploy/grafana/dashboards/<file>).
var runbookPanel = regexp.MustCompile(`\[([^\]›]+?) › ([^\]]+)\]\(\.\./` + regexp.QuoteMeta(dashboardsDir) + `/([a-z]+\.json)\)`)

// The runbook's section of every alert, and its retention section, say which panels to look
// at (a **Dashboard.** paragraph), and every panel it names exists.
func TestTheRunbookNamesThePanelsToLookAt(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, runbook))
	require.NoError(t, err)
	sections := map[string]string{}
	var cur string
	for line := range strings.Lines(string(b)) {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = strings.TrimSpace(h)
			continue
		}
		if cur != "" {
			sections[cur] += line
		}
	}
	want := []string{"Retention"}
	for _, r := range loadRules(t) {
		if r.Alert != "" && !slices.Contains(want, r.Alert) {
			want = append(want, r.Alert)
		}
	}
	ds := loadDashboards(t)
	for _, name := range want {
		text, ok := sections[name]
		require.True(t, ok, "%s has no section %s", runbook, name)
		require.Contains(t, text, "**Dashboard.**", "%s: section %s names no panel", runbook, name)
		links := runbookPanel.FindAllStringSubmatch(text, -1)
		require.NotEmpty(t, links, "%s: section %s links no panel as [<dashboard> › <panel>](../%s/<file>)", runbook, name, dashboardsDir)
		for _, l := range links {
			d, ok := ds[l[3]]
			if !assert.True(t, ok, "%s: section %s links %s", runbook, name, l[3]) {
				continue
			}
			assert.Equal(t, d.Title, l[1], "%s: section %s: the title of %s", runbook, name, l[3])
			assert.True(t, slices.ContainsFunc(d.allPanels(), func(p panel) bool { return p.Title == l[2] }),
				"%s: section %s: %s has no panel %q", runbook, name, l[3], l[2])
		}
	}
}
