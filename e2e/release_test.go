package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
)

// TestAReleaseSaysItsCommit runs what `make release` runs (scripts/release.sh), for this
// machine's platform, into a directory of its own, and checks what it made: each binary's
// --version names the checkout's commit; each is static and built with -trimpath; SHA256SUMS
// holds for every file it made; and each binary's SBOM is CycloneDX, names the module at the
// release's version on the binary's platform, the modules the binary records, and the
// binary's own hash.
func TestAReleaseSaysItsCommit(t *testing.T) {
	testenv.SkipIfShort(t, "a release build")
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	require.NoError(t, err, "a release is built from a git checkout")
	commit := strings.TrimSpace(string(out))
	require.Regexp(t, `^[0-9a-f]{40}$`, commit)

	dir := t.TempDir()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	binaries := []string{"walletsvc", "notifier", "providersim", "demo"}
	cmd := exec.CommandContext(ctx, "bash", "../scripts/release.sh")
	// The tree may have changes while the tests run: its binaries then say -modified.
	cmd.Env = append(os.Environ(), "RELEASE_DIR="+dir, "RELEASE_PLATFORMS="+platform, "RELEASE_VERSION=v0.0.0-e2e",
		"RELEASE_BINARIES="+strings.Join(binaries, " "), "RELEASE_ALLOW_MODIFIED=1")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "scripts/release.sh:\n%s", b)

	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, sums, len(files)-1, "SHA256SUMS covers every file but itself")
	for name, sum := range sums {
		require.Equal(t, sum, sha256File(t, filepath.Join(dir, name)), name)
	}

	for _, name := range binaries {
		bin := filepath.Join(dir, name+"-v0.0.0-e2e-"+runtime.GOOS+"-"+runtime.GOARCH)
		require.Contains(t, sums, filepath.Base(bin))

		vctx, vcancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(vctx, bin, "--version").CombinedOutput()
		vcancel()
		require.NoError(t, err, "%s --version: %s", name, out)
		line := strings.TrimSpace(string(out))
		require.Regexp(t, `^`+name+` version v0\.0\.0-e2e revision `+commit+`(-modified)? go1\.\S+ `+platform+`$`, line)

		bi, err := buildinfo.ReadFile(bin)
		require.NoError(t, err)
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		require.Equal(t, "true", settings["-trimpath"], name)
		require.Equal(t, "0", settings["CGO_ENABLED"], name)
		if runtime.GOOS == "linux" {
			f, err := elf.Open(bin)
			require.NoError(t, err)
			for _, p := range f.Progs {
				require.NotEqual(t, elf.PT_INTERP, p.Type, "%s is static: it names no dynamic loader", name)
			}
			require.NoError(t, f.Close())
		}

		var sbom struct {
			BOMFormat string `json:"bomFormat"`
			Metadata  struct {
				Component struct {
					Name    string `json:"name"`
					Version string `json:"version"`
					PURL    string `json:"purl"`
				} `json:"component"`
				Properties []struct{ Name, Value string } `json:"properties"`
			} `json:"metadata"`
			Components []struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"components"`
		}
		raw, err := os.ReadFile(bin + ".cdx.json")
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &sbom))
		require.Equal(t, "CycloneDX", sbom.BOMFormat)
		require.Equal(t, "github.com/walletsaga/walletsaga", sbom.Metadata.Component.Name)
		require.Equal(t, "v0.0.0-e2e", sbom.Metadata.Component.Version)
		require.Contains(t, sbom.Metadata.Component.PURL, "goarch="+runtime.GOARCH)
		require.Contains(t, sbom.Metadata.Component.PURL, "#cmd/"+name)
		props := map[string]string{}
		for _, p := range sbom.Metadata.Properties {
			props[p.Name] = p.Value
		}
		require.Equal(t, sums[filepath.Base(bin)], props["cdx:gomod:binary:hash:SHA-256"], "the SBOM describes this very binary")
		recorded := map[string]string{}
		for _, c := range sbom.Components {
			recorded[c.Name] = c.Version
		}
		for _, dep := range bi.Deps {
			if dep.Replace == nil {
				require.Equal(t, dep.Version, recorded[dep.Path], "%s: %s in the SBOM", name, dep.Path)
			}
		}
	}
}

// readSums reads a sha256sum file: file name to hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "a sha256sum line: %q", sc.Text())
		sums[name] = sum
	}
	require.NoError(t, sc.Err())
	return sums
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
