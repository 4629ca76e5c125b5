package deploy

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// BinaryRun is a compose service that runs one of the project's binaries.
type BinaryRun struct {
	Name    string
	Service types.ServiceConfig
	Env     map[string]string
	Sub     string   // the subcommand, read as the binary's run reads it
	Args    []string // what follows the subcommand
}

// RunsOf returns, in name order, the services whose command starts with binary (e.g.
// "/walletsvc"), with their environment and their subcommand (defaultSub when the command
// names none, as run does: an optional subcommand, then flags).
func RunsOf(p *types.Project, binary, defaultSub string) ([]BinaryRun, error) {
	var runs []BinaryRun
	for _, name := range p.ServiceNames() {
		svc := p.Services[name]
		if len(svc.Command) == 0 || svc.Command[0] != binary {
			continue
		}
		env, err := Environment(svc)
		if err != nil {
			return nil, err
		}
		r := BinaryRun{Name: name, Service: svc, Env: env, Sub: defaultSub, Args: svc.Command[1:]}
		if len(r.Args) > 0 && !strings.HasPrefix(r.Args[0], "-") {
			r.Sub, r.Args = r.Args[0], r.Args[1:]
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// RequireReadsEnvironment calls parse (the binary's configuration parser) with a getenv that
// answers from r's environment and records every name asked for. It fails t if parse rejects
// the values, or if compose gives r a variable parse never asks for. It returns the names
// asked for.
func RequireReadsEnvironment(t testing.TB, r BinaryRun, binary string, parse func(getenv func(string) string) error) map[string]bool {
	t.Helper()
	read := map[string]bool{}
	if err := parse(func(k string) string {
		read[k] = true
		return r.Env[k]
	}); err != nil {
		t.Fatalf("%s: %s rejects the compose settings: %v", r.Name, binary, err)
	}
	for k := range r.Env {
		// The OpenTelemetry SDK reads its own variables (OTEL_*) from the process's
		// environment (internal/telemetry), not through the configuration's getenv.
		if !read[k] && !strings.HasPrefix(k, "OTEL_") {
			t.Errorf("docker-compose.yml gives %s the variable %s, which %s does not read", r.Name, k, binary)
		}
	}
	return read
}

// RequirePublishedHTTP fails t unless httpAddr listens on 0.0.0.0 at a port r publishes.
func RequirePublishedHTTP(t testing.TB, r BinaryRun, httpAddr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		t.Fatalf("%s: HTTP_ADDR %q: %v", r.Name, httpAddr, err)
	}
	if host != "0.0.0.0" {
		t.Errorf("%s: HTTP_ADDR host is %q, want 0.0.0.0", r.Name, host)
	}
	if !slices.ContainsFunc(r.Service.Ports, func(pc types.ServicePortConfig) bool { return strconv.Itoa(int(pc.Target)) == port }) {
		t.Errorf("%s: HTTP_ADDR's port %s is not published", r.Name, port)
	}
}

// RequireScraped fails t unless the compose stack's Prometheus (root's PrometheusConfigFile)
// has a job named after r's service that scrapes it, over HTTP, where httpAddr listens, at
// /metrics.
func RequireScraped(t testing.TB, root string, r BinaryRun, httpAddr string) {
	t.Helper()
	c, err := LoadPrometheusConfig(root)
	if err != nil {
		t.Fatal(err)
	}
	job, ok := c.Job(r.Name)
	if !ok {
		t.Fatalf("%s: Prometheus has no job %s", PrometheusConfigFile, r.Name)
	}
	_, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		t.Fatalf("%s: HTTP_ADDR %q: %v", r.Name, httpAddr, err)
	}
	if want := []string{net.JoinHostPort(r.Name, port)}; !slices.Equal(job.Targets(), want) {
		t.Errorf("%s: job %s scrapes %q, want %q (the service where it listens)", PrometheusConfigFile, r.Name, job.Targets(), want)
	}
	if job.URLPath() != "/metrics" || job.Scheme != "" && job.Scheme != "http" {
		t.Errorf("%s: job %s scrapes %s://…%s, want http://…/metrics", PrometheusConfigFile, r.Name, job.Scheme, job.URLPath())
	}
}
