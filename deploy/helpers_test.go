package deploy

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const root = ".."

var loadProject = sync.OnceValues(func() (*types.Project, error) {
	return LoadCompose(context.Background(), root)
})

func project(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadProject()
	require.NoError(t, err)
	return p
}

func service(t *testing.T, name string) types.ServiceConfig {
	t.Helper()
	svc, err := project(t).GetService(name)
	require.NoError(t, err)
	return svc
}

func env(t *testing.T, name string) map[string]string {
	t.Helper()
	e, err := Environment(service(t, name))
	require.NoError(t, err)
	return e
}

// splitImage splits "repo[:tag][@digest]"; a registry port ("host:5000/x") is not a tag.
func splitImage(ref string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

func requirePinned(t *testing.T, what, ref string) (repo, tag string) {
	t.Helper()
	repo, tag, digest := splitImage(ref)
	assert.True(t, tag != "" || digest != "", "%s: image %q has neither tag nor digest", what, ref)
	assert.NotEqual(t, "latest", tag, "%s: image %q", what, ref)
	return repo, tag
}

// servicesShVars returns the variables scripts/services.sh sets to a literal or to a literal
// default (VAR="literal", VAR="${VAR:-default}"): the dev stack the compose stack mirrors.
func servicesShVars(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "scripts", "services.sh"))
	require.NoError(t, err)
	vars := map[string]string{}
	re := regexp.MustCompile(`(?m)^([A-Z_]+)="(?:\$\{([A-Z_]+):-([^}$"]*)\}|([^$"]*))"\s*$`)
	for _, m := range re.FindAllSubmatch(b, -1) {
		if len(m[2]) > 0 && string(m[2]) != string(m[1]) {
			continue
		}
		vars[string(m[1])] = string(m[3]) + string(m[4])
	}
	return vars
}

func servicesShVar(t *testing.T, name string) string {
	t.Helper()
	v, ok := servicesShVars(t)[name]
	require.True(t, ok, "scripts/services.sh sets no literal %s", name)
	return v
}

// httpPort returns the port of a service's HTTP_ADDR.
func httpPort(t *testing.T, name string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(env(t, name)["HTTP_ADDR"])
	require.NoError(t, err, "%s: HTTP_ADDR", name)
	require.Equal(t, "0.0.0.0", host, "%s: HTTP_ADDR must listen beyond the container's loopback", name)
	return port
}

func onlyTarget(t *testing.T, name string) string {
	t.Helper()
	ports := service(t, name).Ports
	require.Len(t, ports, 1, "%s: ports", name)
	return strconv.Itoa(int(ports[0].Target))
}

// readYAML decodes the repository file rel into v, refusing keys v does not have.
func readYAML(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(v), rel)
}
