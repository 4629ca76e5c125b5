package buildinfo_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/buildinfo"
)

func TestFrom(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/walletsaga/walletsaga", Version: "v1.2.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "aaaa"}, {Key: "vcs.modified", Value: "true"}}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/walletsaga/walletsaga", Version: "(devel)"}}
	linked := buildinfo.Linked{Version: "v1.2.0-3-gbbbb", Revision: "bbbb", Modified: false}
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		l    buildinfo.Linked
		want buildinfo.Info
	}{
		{"the toolchain stamped", stamped, true, buildinfo.Linked{}, buildinfo.Info{Version: "v1.2.0", Revision: "aaaa", Modified: true, GoVersion: "go1.26.8"}},
		{"the toolchain's stamp wins", stamped, true, linked, buildinfo.Info{Version: "v1.2.0", Revision: "aaaa", Modified: true, GoVersion: "go1.26.8"}},
		{"the linker stands in", devel, true, linked, buildinfo.Info{Version: "v1.2.0-3-gbbbb", Revision: "bbbb", GoVersion: "go1.26.8"}},
		{"nothing recorded", devel, true, buildinfo.Linked{}, buildinfo.Info{Version: "(devel)", Revision: buildinfo.Unknown, GoVersion: "go1.26.8"}},
		{"no build information", nil, false, buildinfo.Linked{}, buildinfo.Info{Version: "(devel)", Revision: buildinfo.Unknown, GoVersion: runtime.Version()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, buildinfo.From(c.bi, c.ok, c.l))
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	i := buildinfo.Info{Version: "v1.2.0", Revision: "aaaa", Modified: true, GoVersion: "go1.26.8"}
	require.Equal(t, "walletsvc version v1.2.0 revision aaaa-modified go1.26.8 "+runtime.GOOS+"/"+runtime.GOARCH, i.String("walletsvc"))
	i.Modified = false
	require.Equal(t, "notifier version v1.2.0 revision aaaa go1.26.8 "+runtime.GOOS+"/"+runtime.GOARCH, i.String("notifier"))
}

// TestReadInATest: a test binary has build information, with the Go version that built it.
func TestReadInATest(t *testing.T) {
	t.Parallel()
	i := buildinfo.Read()
	require.Equal(t, runtime.Version(), i.GoVersion)
	require.NotEmpty(t, i.Version)
	require.NotEmpty(t, i.Revision)
}
