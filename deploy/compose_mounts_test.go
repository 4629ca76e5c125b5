package deploy

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mount is a bind mount of a compose service: a file or directory of the repository.
type mount struct {
	rel    string // the source, relative to the repository root
	target string // where the container sees it
}

// mounts returns name's bind mounts, failing t unless each is of the repository, exists and
// is read-only.
func mounts(t *testing.T, name string) []mount {
	t.Helper()
	repo, err := filepath.Abs(root)
	require.NoError(t, err)
	var out []mount
	for _, v := range service(t, name).Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		rel, err := filepath.Rel(repo, v.Source)
		require.NoError(t, err)
		require.False(t, rel == ".." || strings.HasPrefix(rel, "../"), "%s mounts %s, outside the repository", name, v.Source)
		_, err = os.Stat(v.Source)
		require.NoError(t, err, "%s mounts %s, which does not exist", name, rel)
		assert.True(t, v.ReadOnly, "%s mounts %s read-only", name, rel)
		out = append(out, mount{rel: filepath.ToSlash(rel), target: v.Target})
	}
	return out
}

// mountOf returns where name mounts rel (a path relative to the repository root).
func mountOf(t *testing.T, name, rel string) string {
	t.Helper()
	for _, m := range mounts(t, name) {
		if m.rel == rel {
			return m.target
		}
	}
	t.Fatalf("%s does not mount %s", name, rel)
	return ""
}

// Every file or directory a service mounts from the repository exists, read-only; every
// provisioning file of deploy/grafana is mounted.
func TestComposeMountedFilesExist(t *testing.T) {
	t.Parallel()
	p := project(t)
	mounted := map[string]bool{}
	for _, name := range p.ServiceNames() {
		for _, m := range mounts(t, name) {
			mounted[m.rel] = true
		}
	}
	for _, rel := range []string{"deploy/rocketmq/broker.conf", "deploy/rocketmq/tools.yml", PrometheusConfigFile,
		"deploy/prometheus/rules.yml", "deploy/grafana/dashboards"} {
		assert.True(t, mounted[rel], "%s is mounted", rel)
	}
	err := filepath.WalkDir(filepath.Join(root, "deploy", "grafana", "provisioning"), func(file string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, file)
		assert.True(t, mounted[filepath.ToSlash(rel)], "%s is not mounted into Grafana", rel)
		return err
	})
	require.NoError(t, err)
}

// Prometheus reads the mounted configuration, which loads the mounted rules (those the rules'
// tests check) and scrapes the long-running services of our binaries; promtool accepts it.
func TestComposePrometheus(t *testing.T) {
	t.Parallel()
	svc := service(t, "prometheus")
	conf := mountOf(t, "prometheus", PrometheusConfigFile)
	assert.Equal(t, "/etc/prometheus/prometheus.yml", conf, "the image's configuration path")
	assert.Contains(t, svc.Command, "--config.file="+conf)
	assert.Contains(t, svc.Command, "--storage.tsdb.path=/prometheus", "the image's data volume")

	c, err := LoadPrometheusConfig(root)
	require.NoError(t, err)
	rules := mountOf(t, "prometheus", filepath.ToSlash(filepath.Join("deploy", rulesDir, rulesFile)))
	var loaded []string
	for _, f := range c.RuleFiles {
		if !path.IsAbs(f) {
			f = path.Join(path.Dir(conf), f)
		}
		loaded = append(loaded, f)
	}
	assert.Equal(t, []string{rules}, loaded, "Prometheus loads the mounted rules, relative to its configuration")
	interval, err := time.ParseDuration(c.Global.ScrapeInterval)
	require.NoError(t, err, "scrape_interval")
	assert.LessOrEqual(t, interval, 15*time.Second, "a scrape at least every 15 s: the rules' shortest window is 5m")

	// One job per long-running service of our binaries, named after it (the binaries'
	// compose tests check where each scrapes).
	var want []string
	for binary, sub := range map[string]string{"/walletsvc": "serve", "/notifier": "run"} {
		runs, err := RunsOf(project(t), binary, sub)
		require.NoError(t, err)
		for _, r := range runs {
			if r.Sub == sub {
				want = append(want, r.Name)
			}
		}
	}
	var jobs []string
	for _, j := range c.ScrapeConfigs {
		jobs = append(jobs, j.JobName)
	}
	assert.ElementsMatch(t, want, jobs, "Prometheus's jobs")

	bin := promtool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "check", "config", filepath.Join(root, PrometheusConfigFile)).CombinedOutput()
	require.NoError(t, err, "promtool check config:\n%s", out)
}

// Grafana is provisioned from the repository: its Prometheus as the datasource, the
// dashboards of deploy/grafana/dashboards read-only, the SLOs as the home page, viewers
// without a login and nothing fetched from the internet.
func TestComposeGrafana(t *testing.T) {
	t.Parallel()
	e := env(t, "grafana")

	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool `yaml:"isDefault"`
			Editable                     bool
			JSONData                     map[string]any `yaml:"jsonData"`
		}
	}
	dsFile := "deploy/grafana/provisioning/datasources/prometheus.yml"
	readYAML(t, dsFile, &ds)
	assert.Equal(t, "/etc/grafana/provisioning/datasources", path.Dir(mountOf(t, "grafana", dsFile)))
	assert.Equal(t, 1, ds.APIVersion)
	require.Len(t, ds.Datasources, 1)
	d := ds.Datasources[0]
	assert.Equal(t, "prometheus", d.Type)
	assert.Equal(t, "proxy", d.Access, "Grafana's server queries Prometheus, not the browser")
	assert.Equal(t, "http://prometheus:"+onlyTarget(t, "prometheus"), d.URL, "the compose service")
	assert.True(t, d.IsDefault, "the dashboards' datasource variable picks the default")
	assert.False(t, d.Editable)
	c, err := LoadPrometheusConfig(root)
	require.NoError(t, err)
	assert.Equal(t, c.Global.ScrapeInterval, d.JSONData["timeInterval"], "Grafana knows the scrape interval ($__rate_interval)")

	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Folder, Type string
			DisableDeletion    bool `yaml:"disableDeletion"`
			AllowUIUpdates     bool `yaml:"allowUiUpdates"`
			UpdateInterval     int  `yaml:"updateIntervalSeconds"`
			Options            struct {
				Path                      string
				FoldersFromFilesStructure bool `yaml:"foldersFromFilesStructure"`
			}
		}
	}
	dpFile := "deploy/grafana/provisioning/dashboards/walletsaga.yml"
	readYAML(t, dpFile, &dp)
	assert.Equal(t, "/etc/grafana/provisioning/dashboards", path.Dir(mountOf(t, "grafana", dpFile)))
	require.Len(t, dp.Providers, 1)
	pr := dp.Providers[0]
	assert.Equal(t, "file", pr.Type)
	assert.False(t, pr.AllowUIUpdates, "the repository's JSON is the dashboards' source")
	dashboards := mountOf(t, "grafana", dashboardsDir)
	assert.Equal(t, dashboards, pr.Options.Path, "the provider reads the mounted dashboards")

	home, ok := strings.CutPrefix(e["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"], dashboards+"/")
	if assert.True(t, ok, "the home dashboard is one of the mounted ones") {
		_, err := os.Stat(filepath.Join(root, dashboardsDir, home))
		assert.NoError(t, err, "home dashboard")
		assert.Equal(t, "overview.json", home, "the SLOs")
	}
	assert.Equal(t, "true", e["GF_AUTH_ANONYMOUS_ENABLED"])
	assert.Equal(t, "Viewer", e["GF_AUTH_ANONYMOUS_ORG_ROLE"], "anonymous visitors only view")
	assert.Equal(t, "false", e["GF_USERS_ALLOW_SIGN_UP"])
	assert.NotEmpty(t, e["GF_SECURITY_ADMIN_PASSWORD"], "not the image's admin/admin")
	for _, v := range []string{"GF_PLUGINS_PREINSTALL_DISABLED"} {
		assert.Equal(t, "true", e[v], v)
	}
	for _, v := range []string{"GF_ANALYTICS_REPORTING_ENABLED", "GF_ANALYTICS_CHECK_FOR_UPDATES", "GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES", "GF_NEWS_NEWS_FEED_ENABLED"} {
		assert.Equal(t, "false", e[v], v)
	}
}
