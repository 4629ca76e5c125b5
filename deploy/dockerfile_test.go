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

// argDefaults returns the defaults of the ARGs before the first FROM (the images' variables).
func argDefaults(instrs []dockerInstr) map[string]string {
	out := map[string]string{}
	for _, in := range instrs {
		if in.cmd == "FROM" {
			break
		}
		if k, v, ok := strings.Cut(in.args, "="); in.cmd == "ARG" && ok {
			out[k] = v
		}
	}
	return out
}

// fromImage returns a FROM's image with a ${VAR} of argDefaults replaced by its default.
func fromImage(args string, defaults map[string]string) string {
	img := strings.Fields(args)[0]
	if v, ok := strings.CutPrefix(img, "${"); ok {
		if name, ok := strings.CutSuffix(v, "}"); ok {
			return defaults[name]
		}
	}
	return img
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
	instrs := readDockerfile(t)
	st := stages(instrs)
	require.Len(t, st, 2, "a build stage and a runtime stage")
	build, final := st[0], st[len(st)-1]
	// Each upstream image is named by one variable (deploy/standins/build.sh builds local
	// stand-ins for machines that reach no registry): the builder GO_IMAGE, the runtime
	// RUNTIME_IMAGE.
	defaults := argDefaults(instrs)
	assert.Equal(t, "${GO_IMAGE}", strings.Fields(build[0].args)[0], "the builder is GO_IMAGE")
	assert.Equal(t, "${RUNTIME_IMAGE}", strings.Fields(final[0].args)[0], "the runtime base is RUNTIME_IMAGE")

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(gomod)
	require.NotNil(t, goVersion)

	for i, s := range st {
		f := strings.Fields(s[0].args)
		repo, tag := requirePinned(t, "Dockerfile FROM", fromImage(s[0].args, defaults))
		if i == 0 {
			// The golang images set GOTOOLCHAIN=local: they build only what their Go accepts.
			require.Equal(t, "golang", repo)
			assert.True(t, versionAtLeast(strings.SplitN(tag, "-", 2)[0], string(goVersion[1])),
				"golang:%s is older than go.mod's go %s", tag, goVersion[1])
			require.Equal(t, []string{"AS", "build"}, []string{strings.ToUpper(f[1]), f[2]}, "the first stage is `build`")
		}
	}

	// The build downloads only the modules the binaries import (go build does; `go mod
	// download` would fetch the lint and test tools go.mod also requires), into a module
	// cache kept between builds, with a build cache kept too; go.mod's local replacements are
	// in the build context by then.
	goBuild := slices.IndexFunc(build, func(in dockerInstr) bool { return in.cmd == "RUN" && strings.Contains(in.args, "go build") })
	require.GreaterOrEqual(t, goBuild, 0, "build stage: RUN go build")
	assert.NotContains(t, build[goBuild].args, "go mod download", "no download of every module go.mod requires")
	for _, cache := range []string{"/go/pkg/mod", "/root/.cache/go-build"} {
		assert.Contains(t, build[goBuild].args, "--mount=type=cache,target="+cache, "the build keeps %s between builds", cache)
	}
	var copied []string
	for _, in := range build[:goBuild] {
		assert.NotEqual(t, "RUN", in.cmd, "nothing runs before the build: %s", in.args)
		if in.cmd == "COPY" {
			f := strings.Fields(in.args)
			for _, src := range f[:len(f)-1] {
				copied = append(copied, filepath.Clean(src))
			}
		}
	}
	assert.Contains(t, copied, ".", "build stage: the context (go.mod's replacement ./third_party/… in it) before go build")

	// The version and the revision (scripts/release.sh's linker settings) reach the binaries
	// and the image's OCI labels.
	for _, arg := range []string{"WALLETSAGA_VERSION", "WALLETSAGA_REVISION"} {
		assert.Contains(t, build[goBuild].args, "$"+arg, "go build records %s", arg)
	}
	var labels string
	for _, in := range final {
		if in.cmd == "LABEL" {
			labels += in.args
		}
	}
	assert.Contains(t, labels, `org.opencontainers.image.revision="${WALLETSAGA_REVISION}"`)
	assert.Contains(t, labels, `org.opencontainers.image.version="${WALLETSAGA_VERSION}"`)
	// Passed when set in the environment (the loader, which reads none, drops them).
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	for _, arg := range []string{"GO_IMAGE", "RUNTIME_IMAGE", "WALLETSAGA_VERSION", "WALLETSAGA_REVISION"} {
		assert.Regexp(t, `(?m)^      - `+arg+`$`, string(compose), "docker-compose.yml passes %s to the build", arg)
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
	base, _, _ := splitImage(fromImage(final[0].args, defaults))
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
