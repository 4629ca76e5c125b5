package deploy

// These tests hold the Prometheus rules (prometheus/rules.yml) to what an on-call person
// needs: promtool accepts them and their unit tests (prometheus/rules_test.yml) pass; every
// alert has a severity, a summary, a description and a runbook section, and is tested both
// firing and not firing; and every series a rule reads (its expression parsed with
// Prometheus's own parser) is one the binaries serve, with the labels it matches, or one a
// rule records, so a typo in a rule cannot hide behind test series that share it.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
)

const (
	rulesDir  = "prometheus"
	rulesFile = "rules.yml"
	testsFile = "rules_test.yml"
	runbook   = "docs/RUNBOOK.md"
)

// promtool returns the path of promtool (Debian's prometheus package, which `make tools`
// installs), or fails (CI, make test) or skips the test.
func promtool(t *testing.T) string {
	t.Helper()
	testenv.SkipIfShort(t, "promtool")
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	msg := "promtool not found: `make tools` installs it (apt-get install -y --no-install-recommends prometheus)"
	if testenv.Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func TestTheRulesPassPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", testsFile}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		require.Contains(t, string(out), "SUCCESS", "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rulesDir, rulesFile))
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &f))
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	require.NotEmpty(t, rules)
	return rules
}

// sections returns the level-2 headings of the runbook, as GitHub anchors them.
func sections(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, runbook))
	require.NoError(t, err)
	anchors := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if h, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "## "); ok {
			anchors[githubAnchor(h)] = true
		}
	}
	return anchors
}

// githubAnchor is the fragment GitHub gives a heading: lower case, punctuation but '-' and
// '_' dropped, spaces as '-'.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestEveryAlertHasARunbookSectionAndItsWords(t *testing.T) {
	t.Parallel()
	anchors := sections(t)
	alerts := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			require.NotEmpty(t, r.Record, "a rule is an alert or a recording")
			continue
		}
		alerts[r.Alert] = true
		require.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], "%s: severity", r.Alert)
		for _, a := range []string{"summary", "description", "runbook_url"} {
			require.NotEmpty(t, r.Annotations[a], "%s: annotation %s", r.Alert, a)
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbook+"#")
		require.True(t, ok, "%s: runbook_url %q points into %s", r.Alert, url, runbook)
		require.Equal(t, githubAnchor(r.Alert), anchor, "%s: its runbook section is named after it", r.Alert)
		require.True(t, anchors[anchor], "%s: %s has no section %q", r.Alert, runbook, anchor)
	}
	for a := range anchors {
		if strings.HasPrefix(a, "walletsaga") {
			require.True(t, slices.ContainsFunc(keys(alerts), func(n string) bool { return githubAnchor(n) == a }),
				"%s section %q is for no alert in %s", runbook, a, rulesFile)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestEveryAlertIsTestedFiringAndNotFiring(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(rulesDir, testsFile))
	require.NoError(t, err)
	var f struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name  string `yaml:"name"`
			Cases []struct {
				Alert     string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(b, &f))
	require.Equal(t, []string{rulesFile}, f.RuleFiles)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, c := range tc.Cases {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alert] = true
			} else {
				quiet[c.Alert] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert != "" {
			alerts[r.Alert] = true
		}
	}
	for a := range alerts {
		require.True(t, fires[a], "%s: no test where it fires", a)
		require.True(t, quiet[a], "%s: no test where it does not fire", a)
	}
	for a := range fires {
		require.True(t, alerts[a], "%s is tested but is no alert", a)
	}
	for a := range quiet {
		require.True(t, alerts[a], "%s is tested but is no alert", a)
	}
}

func TestTheRulesReadMetricsTheBinariesServe(t *testing.T) {
	t.Parallel()
	rules := loadRules(t)
	k := knownSeries(rules)
	require.Contains(t, k.served, "walletsaga_notify_commit_to_sms_seconds", "the describer sees what internal/metrics registers")
	for _, r := range rules {
		require.Empty(t, k.problems(r.Expr), "%s%s", r.Alert, r.Record)
	}
}
