package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComposeImagesArePinned(t *testing.T) {
	t.Parallel()
	p := project(t)
	rmqVersion := servicesShVar(t, "RMQ_VERSION")
	for _, name := range p.ServiceNames() {
		svc := service(t, name)
		require.NotEmpty(t, svc.Image, "%s: no image", name)
		repo, tag := requirePinned(t, name, svc.Image)
		if slices.Contains(built, name) {
			require.NotNil(t, svc.Build, "%s runs the project's binaries: it must be built from ./Dockerfile", name)
			assert.Equal(t, p.WorkingDir, svc.Build.Context, "%s: build context", name)
			assert.Equal(t, "Dockerfile", svc.Build.Dockerfile, "%s", name)
			// One image for all of them, so that `up` builds one thing.
			assert.Equal(t, service(t, built[0]).Image, svc.Image, "%s: image name", name)
			continue
		}
		assert.Nil(t, svc.Build, "%s: only the project's own services are built", name)
		if repo == "apache/rocketmq" {
			assert.Equal(t, rmqVersion, tag, "%s: the RocketMQ image must be the version of the dev stack (RMQ_VERSION in scripts/services.sh)", name)
			assert.True(t, strings.HasPrefix(tag, "5."), "%s: RocketMQ 5.x", name)
		}
	}
	for _, name := range []string{"namesrv", "broker", "topics"} {
		repo, _, _ := splitImage(service(t, name).Image)
		assert.Equal(t, "apache/rocketmq", repo, "%s: the official image", name)
	}
	repo, _, _ := splitImage(service(t, "postgres").Image)
	assert.Equal(t, "postgres", repo)

	// The official images. Prometheus is the release whose PromQL parser the dashboards'
	// and rules' tests parse with. Grafana's open-source image is grafana/grafana: the
	// grafana/grafana-oss repository, the same image, gets no tags after 12.3.
	repo, tag, _ := splitImage(service(t, "prometheus").Image)
	assert.Equal(t, "prom/prometheus", repo)
	assert.Equal(t, prometheusRelease(t), tag, "prometheus: the release of the parser module in go.mod")
	repo, tag, _ = splitImage(service(t, "grafana").Image)
	assert.Equal(t, "grafana/grafana", repo)
	assert.Regexp(t, `^12\.4\.[0-9]+$`, tag, "grafana: 12.4, the last 12.x (13 saves dashboards in a format file provisioning refuses)")
}

// prometheusRelease returns the Prometheus release of the github.com/prometheus/prometheus
// module go.mod requires: module v0.316.0 is release v3.16.0.
func prometheusRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*github\.com/prometheus/prometheus v0\.([0-9]+)\.([0-9]+)\s*$`).FindSubmatch(b)
	require.NotNil(t, m, "go.mod requires github.com/prometheus/prometheus v0.N.P")
	minor, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return fmt.Sprintf("v%d.%d.%s", minor/100, minor%100, m[2])
}
