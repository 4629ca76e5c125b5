package deploy

import (
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

// dockerInstr is one instruction of a Dockerfile, continuation lines joined.
type dockerInstr struct{ cmd, args string }

func readDockerfile(t *testing.T) []dockerInstr {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	var out []dockerInstr
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// stages splits a Dockerfile into its stages, each starting with its FROM.
func stages(instrs []dockerInstr) [][]dockerInstr {
	var out [][]dockerInstr
	for _, in := range instrs {
		if in.cmd == "FROM" {
			out = append(out, nil)
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], in)
		}
	}
	return out
}

// dockerfileBinaries returns the absolute paths of what the final stage copies from the build.
func dockerfileBinaries(t *testing.T) []string {
	t.Helper()
	st := stages(readDockerfile(t))
	require.NotEmpty(t, st)
	var bins []string
	for _, in := range st[len(st)-1] {
		if in.cmd != "COPY" || !strings.HasPrefix(in.args, "--from=build ") {
			continue
		}
		f := strings.Fields(in.args)[1:]
		if f[len(f)-1] != "/" {
			continue
		}
		for _, src := range f[:len(f)-1] {
			bins = append(bins, "/"+filepath.Base(src))
		}
	}
	return bins
}

func versionAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := range w {
		if i >= len(h) {
			return false
		}
		a, _ := strconv.Atoi(h[i])
		b, _ := strconv.Atoi(w[i])
		if a != b {
			return a > b
		}
	}
	return true
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	st := stages(readDockerfile(t))
	require.Len(t, st, 2, "a build stage and a runtime stage")
	build, final := st[0], st[len(st)-1]

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(gomod)
	require.NotNil(t, goVersion)

	for i, s := range st {
		f := strings.Fields(s[0].args)
		repo, tag := requirePinned(t, "Dockerfile FROM", f[0])
		if i == 0 {
			// The golang images set GOTOOLCHAIN=local: they build only what their Go accepts.
			require.Equal(t, "golang", repo)
			assert.True(t, versionAtLeast(strings.SplitN(tag, "-", 2)[0], string(goVersion[1])),
				"golang:%s is older than go.mod's go %s", tag, goVersion[1])
			require.Equal(t, []string{"AS", "build"}, []string{strings.ToUpper(f[1]), f[2]}, "the first stage is `build`")
		}
	}

	// go.mod's local replacements have to be in the build context before `go mod download`.
	download := slices.IndexFunc(build, func(in dockerInstr) bool { return in.cmd == "RUN" && strings.Contains(in.args, "go mod download") })
	require.GreaterOrEqual(t, download, 0, "build stage: RUN go mod download (a cached layer of the modules)")
	var copied []string
	for _, in := range build[:download] {
		if in.cmd == "COPY" {
			f := strings.Fields(in.args)
			for _, src := range f[:len(f)-1] {
				copied = append(copied, filepath.Clean(src))
			}
		}
	}
	need := []string{"go.mod", "go.sum"}
	for _, m := range regexp.MustCompile(`(?m)^replace\s+\S+(?:\s+\S+)?\s+=>\s+(\./\S+)\s*$`).FindAllSubmatch(gomod, -1) {
		need = append(need, filepath.Clean(string(m[1])))
	}
	require.Greater(t, len(need), 2, "go.mod replaces rocketmq-client-go with ./third_party/…")
	for _, n := range need {
		assert.Contains(t, copied, n, "build stage: COPY %s before go mod download", n)
	}

	var buildLine string
	var cgoOff bool
	for _, in := range build {
		if in.cmd == "ENV" && regexp.MustCompile(`(^|\s)CGO_ENABLED=0(\s|$)`).MatchString(in.args) {
			cgoOff = true
		}
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			buildLine = in.args
			cgoOff = cgoOff || strings.Contains(in.args, "CGO_ENABLED=0")
		}
	}
	assert.True(t, cgoOff, "static binaries: CGO_ENABLED=0")
	bins := dockerfileBinaries(t)
	assert.ElementsMatch(t, []string{"/walletsvc", "/notifier", "/providersim", "/demo"}, bins, "binaries in the image")
	for _, bin := range bins {
		pkg := "./cmd" + bin
		assert.Contains(t, strings.Fields(buildLine), pkg, "the build stage builds %s", pkg)
		_, err := os.Stat(filepath.Join(root, "cmd", bin[1:]))
		assert.NoError(t, err, "%s is a package of this repository", pkg)
	}

	var user string
	for _, in := range final {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	assert.NotContains(t, []string{"", "0", "root"}, uid, "the image runs as a non-root user")

	// The health checks of the built services run wget: the runtime base must have it.
	base, _, _ := splitImage(strings.Fields(final[0].args)[0])
	for _, name := range built {
		if hc := service(t, name).HealthCheck; hc != nil && slices.Contains(hc.Test, "wget") {
			assert.Contains(t, []string{"busybox", "alpine"}, base, "%s's health check runs wget", name)
		}
	}
}

func TestDockerignore(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	for _, p := range []string{".git", ".run"} {
		assert.Contains(t, patterns, p, ".dockerignore keeps %s out of the build context", p)
	}
	for _, p := range patterns {
		assert.False(t, strings.HasPrefix(p, "!"), "no re-includes: %s", p)
		for _, keep := range []string{"go.mod", "go.sum", "third_party", "cmd", "internal", "migrations", "Dockerfile"} {
			match, _ := filepath.Match(p, keep)
			assert.False(t, match, ".dockerignore pattern %q drops %s, which the build needs", p, keep)
		}
	}
}
