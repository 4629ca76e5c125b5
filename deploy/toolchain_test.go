package deploy

import (
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

// The Go toolchain is named in several places that have to move together: go.mod's go line
// (the oldest Go that builds the module), the GOTOOLCHAIN that the Makefile, .ci/run and each
// script running go export (so that a machine with an older Go fetches this one), the
// Dockerfile's builder image and the README's set-up.
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
	want := "go" + goLine[1]
	if tc := regexp.MustCompile(`(?m)^toolchain (\S+)$`).FindStringSubmatch(gomod); tc != nil {
		assert.Equal(t, want, tc[1], "go.mod's toolchain line")
	}

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

	from := regexp.MustCompile(`(?m)^FROM golang:([^\s-]+)`).FindStringSubmatch(read("Dockerfile"))
	require.NotNil(t, from, "the Dockerfile builds on a golang image")
	assert.Equal(t, goLine[1], from[1], "the Dockerfile's golang image")

	assert.Contains(t, read("README.md"), "GOTOOLCHAIN="+want, "the README's set-up")
}
