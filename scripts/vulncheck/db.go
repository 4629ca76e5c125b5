package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

const (
	vulndbModule = "golang.org/x/vulndb"
	// indexdb builds a database from a folder of OSV files, with no network and no git
	// history (vulndb's cmd/gendb needs its git repository, which the module has not).
	indexdbCommand = vulndbModule + "/cmd/indexdb"
)

// moduleVersion is what a module version looks like (vulndb's are pseudo-versions); it
// names a directory of the cache, so nothing else is taken.
var moduleVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// ensureDB returns the absolute path of the database built from vulndb at version, building
// it into cache/<version>/ first when it is not there. A database is moved into place only
// once complete, so a directory at that path is one.
func ensureDB(ctx context.Context, goBin, cache, version string, log io.Writer) (string, error) {
	if !moduleVersion.MatchString(version) {
		return "", fmt.Errorf("-vulndb %q is not a module version", version)
	}
	cache, err := filepath.Abs(cache)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, version)
	if _, err := os.Stat(filepath.Join(dir, "index", "modules.json")); err == nil {
		return dir, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}

	t0 := time.Now()
	fmt.Fprintf(log, "vulncheck: building the vulnerability database from %s@%s into %s (once per version)\n", vulndbModule, version, dir)
	if err := os.MkdirAll(cache, 0o750); err != nil {
		return "", err
	}
	// The work directory is beside the result, so that moving the result into place is a
	// rename; outside any module, so that nothing of this repository's go.mod is read.
	work, err := os.MkdirTemp(cache, ".build-"+version+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work) //nolint:errcheck // a leftover .build-* directory is never read
	out, err := goCommand(ctx, goBin, work, log, "mod", "download", "-json", vulndbModule+"@"+version)
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr != nil || mod.Dir == "" {
		if err == nil {
			err = cmp.Or(jerr, errors.New("no module directory"))
		}
		return "", fmt.Errorf("go mod download %s@%s: %w %s", vulndbModule, version, err, mod.Error)
	}
	built := filepath.Join(work, "db")
	if _, err := goCommand(ctx, goBin, work, log, "run", indexdbCommand+"@"+version,
		"-vulns", filepath.Join(mod.Dir, "data", "osv"), "-out", built); err != nil {
		return "", fmt.Errorf("building the database with %s@%s: %w", indexdbCommand, version, err)
	}
	if err := os.Rename(built, dir); err != nil {
		// Another run built the same version meanwhile: its copy is as good.
		if _, serr := os.Stat(filepath.Join(dir, "index", "modules.json")); serr != nil {
			return "", err
		}
	}
	fmt.Fprintf(log, "vulncheck: built the database in %s\n", time.Since(t0).Round(time.Second))
	return dir, nil
}

// goCommand runs the go command in dir without this module's settings (GOFLAGS, a
// workspace) and returns its standard output; its standard error goes to log, where the go
// command says what it downloads.
func goCommand(ctx context.Context, goBin, dir string, log io.Writer, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, goBin, args...) //nolint:gosec // G204: the go command the Makefile names (GO), with this program's arguments
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	cmd.Stderr = log
	return cmd.Output()
}
