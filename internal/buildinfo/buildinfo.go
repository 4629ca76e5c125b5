// Package buildinfo says which build a binary is: the module version, the VCS revision it was
// built from and whether its tree had changes, and the Go version, as the Go toolchain
// records them in the binary (runtime/debug.ReadBuildInfo).
//
// The toolchain stamps the revision only when it builds inside a git checkout whose .git is
// a directory, with -buildvcs not false: not from a git worktree (whose .git is a file), not
// from a source tree without .git (a Docker build context). So the release build
// (scripts/release.sh) also records them with the linker, -ldflags "-X
// github.com/walletsaga/walletsaga/internal/buildinfo.revision=<commit> ...": what the
// toolchain stamped wins, and the linker's values stand in where it stamped nothing.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the release build with -ldflags -X (see the package comment); empty otherwise.
var (
	version  string // the release's version (git describe)
	revision string // the commit (git rev-parse HEAD)
	modified string // "true" when the tree had changes
)

// Unknown is the revision of a build that recorded none.
const Unknown = "unknown"

// Info is what a binary knows of its build.
type Info struct {
	Version   string // the module version: a tag, a Go pseudo-version, the release's, or "(devel)"
	Revision  string // the VCS commit it was built from, or Unknown
	Modified  bool   // the tree had changes not committed
	GoVersion string // the Go toolchain that built it
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return From(bi, ok, Linked{Version: version, Revision: revision, Modified: modified == "true"})
}

// Linked is what the release build recorded with the linker.
type Linked struct {
	Version  string
	Revision string
	Modified bool
}

// From combines what the toolchain recorded (bi, when ok) with what the linker did: the
// toolchain's revision wins, the linker's stands in where the toolchain stamped none, and
// the linker's version stands in for the toolchain's "(devel)".
func From(bi *debug.BuildInfo, ok bool, l Linked) Info {
	i := Info{Version: "(devel)", Revision: Unknown, GoVersion: runtime.Version()}
	stamped := false
	if ok && bi != nil {
		if bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision, stamped = s.Value, true
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if !stamped && l.Revision != "" {
		i.Revision, i.Modified = l.Revision, l.Modified
	}
	if i.Version == "(devel)" && l.Version != "" {
		i.Version = l.Version
	}
	return i
}

// RevisionLabel is the revision, with "-modified" when the tree had changes (as Prometheus's
// own build_info says it).
func (i Info) RevisionLabel() string {
	if i.Modified {
		return i.Revision + "-modified"
	}
	return i.Revision
}

// String is the one line a binary's --version prints: program, version, revision (with
// "-modified" when the tree had changes), Go version and platform.
func (i Info) String(program string) string {
	return fmt.Sprintf("%s version %s revision %s %s %s/%s", program, i.Version, i.RevisionLabel(), i.GoVersion, runtime.GOOS, runtime.GOARCH)
}
