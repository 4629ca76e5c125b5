package configref_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/configref"
)

func TestSpliceReplacesOnlyItsSection(t *testing.T) {
	t.Parallel()
	ab, ae := configref.Markers("a")
	bb, be := configref.Markers("b")
	doc := "intro\n" + ab + "\nold a\n" + ae + "\n" + bb + "\nold b\n" + be + "\nend\n"
	got, err := configref.Splice(doc, "a", "new a\n")
	require.NoError(t, err)
	require.Equal(t, "intro\n"+ab+"\nnew a\n"+ae+"\n"+bb+"\nold b\n"+be+"\nend\n", got)

	_, err = configref.Splice(doc, "c", "x\n")
	require.ErrorContains(t, err, `no section "c"`)
	_, err = configref.Splice(doc+ab+"\n", "a", "x\n")
	require.Error(t, err, "a section opened twice")
}

func TestRequireRewritesWithUpdateAndThenHolds(t *testing.T) {
	t.Parallel()
	b, e := configref.Markers("x")
	path := filepath.Join(t.TempDir(), "CONFIGURATION.md")
	require.NoError(t, os.WriteFile(path, []byte("# doc\n"+b+"\nstale\n"+e+"\n"), 0o600))

	configref.Require(t, path, "x", "fresh\n", true)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "# doc\n"+b+"\nfresh\n"+e+"\n", string(got))
	configref.Require(t, path, "x", "fresh\n", false) // holds now: a failure would fail this test
}
