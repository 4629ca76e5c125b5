package deploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"

	"go.yaml.in/yaml/v3"
)

// PrometheusConfigFile is the Prometheus configuration of the compose stack, relative to the
// repository root.
const PrometheusConfigFile = "deploy/prometheus/prometheus.yml"

// PrometheusConfig is what the tests read of a Prometheus configuration file: the part the
// compose stack uses, and no key beyond it (LoadPrometheusConfig refuses one).
type PrometheusConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles     []string       `yaml:"rule_files"`
	ScrapeConfigs []ScrapeConfig `yaml:"scrape_configs"`
}

// ScrapeConfig is one scrape job.
type ScrapeConfig struct {
	JobName       string `yaml:"job_name"`
	MetricsPath   string `yaml:"metrics_path"`
	Scheme        string `yaml:"scheme"`
	StaticConfigs []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
}

// LoadPrometheusConfig reads root's PrometheusConfigFile.
func LoadPrometheusConfig(root string) (*PrometheusConfig, error) {
	b, err := fs.ReadFile(os.DirFS(root), PrometheusConfigFile)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c PrometheusConfig
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", PrometheusConfigFile, err)
	}
	return &c, nil
}

// Job returns the scrape job called name.
func (c *PrometheusConfig) Job(name string) (ScrapeConfig, bool) {
	for _, s := range c.ScrapeConfigs {
		if s.JobName == name {
			return s, true
		}
	}
	return ScrapeConfig{}, false
}

// Targets returns the job's targets.
func (s ScrapeConfig) Targets() []string {
	var out []string
	for _, sc := range s.StaticConfigs {
		out = append(out, sc.Targets...)
	}
	return out
}

// URLPath returns the path the job scrapes (Prometheus's default, /metrics, unless set).
func (s ScrapeConfig) URLPath() string {
	if s.MetricsPath == "" {
		return "/metrics"
	}
	return s.MetricsPath
}
