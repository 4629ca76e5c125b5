package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runsGo matches a shell line that runs the go command, directly or as $GO.
var runsGo = regexp.MustCompile(`(^|[\s;&|(!])(go|"?\$\{?GO\}?"?) [a-z]`)

// The Go toolchain is named in several places that have to move together: go.mod's toolchain
// line (the release every build of the project uses: the go command fetches it where the
// machine's Go is older, unless told GOTOOLCHAIN=local), the GOTOOLCHAIN that the Makefile,
// .ci/run and each script running go export, the Dockerfile's builder image and the README's
// set-up. go.mod's go line is the oldest Go that builds the module, so that go vet and go
// build still work with the machine's own Go under GOTOOLCHAIN=local; it is never newer.
func TestGoToolchainPinsAgree(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		return string(b)
	}
	gomod := read("go.mod")
	goLine := regexp.MustCompile(`(?m)^go ([0-9]+\.[0-9]+\.[0-9]+)$`).FindStringSubmatch(gomod)
	require.NotNil(t, goLine, "go.mod's go line names a release (1.N.P)")
	tc := regexp.MustCompile(`(?m)^toolchain go([0-9]+\.[0-9]+\.[0-9]+)$`).FindStringSubmatch(gomod)
	require.NotNil(t, tc, "go.mod's toolchain line names a release (go1.N.P)")
	want := "go" + tc[1]
	assert.LessOrEqual(t, version(t, goLine[1]), version(t, tc[1]), "go.mod's go line is no newer than its toolchain")

	// A line of its own (not the whole file: a failure would print it all).
	hasLine := func(name, line string) {
		t.Helper()
		assert.True(t, slices.Contains(strings.Split(read(name), "\n"), line), "%s: no line %q", name, line)
	}
	hasLine("Makefile", "export GOTOOLCHAIN := "+want)

	scripts := []string{filepath.Join(".ci", "run")}
	sh, err := filepath.Glob(filepath.Join(root, "scripts", "*.sh"))
	require.NoError(t, err)
	for _, path := range sh {
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		for line := range strings.Lines(read(rel)) {
			if !strings.HasPrefix(strings.TrimSpace(line), "#") && runsGo.MatchString(line) {
				scripts = append(scripts, rel)
				break
			}
		}
	}
	require.Contains(t, scripts, filepath.Join("scripts", "demo.sh"), "the scripts that run go are found")
	for _, s := range scripts {
		hasLine(s, "export GOTOOLCHAIN="+want)
	}

	from := regexp.MustCompile(`(?m)^ARG GO_IMAGE=golang:([^\s-]+)`).FindStringSubmatch(read("Dockerfile"))
	require.NotNil(t, from, "the Dockerfile builds on a golang image (GO_IMAGE's default)")
	assert.Equal(t, tc[1], from[1], "the Dockerfile's golang image")

	assert.Contains(t, read("README.md"), "GOTOOLCHAIN="+want, "the README's set-up")
}

// version is a Go release 1.N.P as a number that orders like it.
func version(t *testing.T, v string) int {
	t.Helper()
	var major, minor, patch int
	_, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch)
	require.NoError(t, err, v)
	return (major*1000+minor)*1000 + patch
}
