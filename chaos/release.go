package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// releaseBinaries are the service binaries the upgrade fault starts the run on.
var releaseBinaries = []string{"walletsvc", "notifier"}

// buildRelease makes the previous release's binaries (-upgrade-from) ready, and says where
// they are and whether they were built now.
func (r *chaosRun) buildRelease() error {
	t0 := time.Now()
	dir, fresh, err := buildRelease(context.Background(), r.cfg.Root, r.cfg.RunDir, r.cfg.UpgradeFrom)
	if err != nil {
		return err
	}
	r.cfg.FromBinDir = dir
	how := "built before"
	if fresh {
		how = fmt.Sprintf("built in %s", time.Since(t0).Round(100*time.Millisecond))
	}
	r.printf("chaos: the run starts on the previous release %s (%s, %s); the upgrade fault rolls it to %s\n", r.cfg.UpgradeFrom, dir, how, r.cfg.BinDir)
	return nil
}

// startBinDir is the directory of the binaries the service processes start on: the
// previous release's when the run upgrades from it, else -bin.
func (r *chaosRun) startBinDir() string {
	if r.cfg.FromBinDir != "" {
		return r.cfg.FromBinDir
	}
	return r.cfg.BinDir
}

// buildRelease builds walletsvc and notifier of the commit rev (the previous release) from
// git, into <run-dir>/release/<commit>/, and returns that directory. A directory that holds
// them already is used as it is: the second run of a release builds nothing. The source
// comes out of git archive into a temporary directory, never a work tree of the
// repository's, and is deleted once built; the binaries stay under the run dir (never in the
// repository). The go command is the one make chaos runs (GOTOOLCHAIN as it sets it).
// fresh says whether it built them now.
func buildRelease(ctx context.Context, root, runDir, rev string) (dir string, fresh bool, err error) {
	commit, err := gitOut(ctx, root, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return "", false, fmt.Errorf("the release to upgrade from, %q: %w", rev, err)
	}
	dir = filepath.Join(runDir, "release", commit)
	if built(dir) {
		return dir, false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil { //nolint:gosec // G301: beside the run's other state
		return "", false, err
	}
	src, err := os.MkdirTemp("", "walletsaga-release-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(src) //nolint:errcheck // a temporary copy of the source
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", false, err
	}
	untar.Stdin = pipe
	var gitErr, tarErr strings.Builder
	archive.Stderr, untar.Stderr = &gitErr, &tarErr
	if err := untar.Start(); err != nil {
		return "", false, err
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return "", false, fmt.Errorf("git archive %s: %w: %s", commit, err, gitErr.String())
	}
	if err := untar.Wait(); err != nil {
		return "", false, fmt.Errorf("unpacking %s: %w: %s", commit, err, tarErr.String())
	}
	// Built beside the final directory and renamed into it, so an interrupted build leaves
	// no half of a release that a later run would take for the whole.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), commit+".building-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // gone once renamed; left only by a failed build
	for _, b := range releaseBinaries {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(tmp, b), "./cmd/"+b)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", false, fmt.Errorf("building %s of %s: %w: %s", b, commit[:12], err, out)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", false, err
	}
	return dir, true, nil
}

// built reports whether dir holds every release binary.
func built(dir string) bool {
	for _, b := range releaseBinaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false
		}
	}
	return true
}

// gitOut runs git in root and returns its output, trimmed.
func gitOut(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.New(strings.TrimSpace(err.Error() + ": " + stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
