package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testdata/scan.json is govulncheck v1.9.0's JSON output, cut down, from a scan of this
// module with go1.26.8: a standard library vulnerability the code reaches (GO-2026-6603),
// the two echo ones it reaches (GO-2026-6872, GO-2026-6875) and one echo vulnerability found
// only in packages it imports (GO-2026-6842).
func readFixture(t *testing.T) *scan {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "scan.json"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	s, err := readScan(f)
	require.NoError(t, err)
	return s
}

func TestReadScan(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	require.Equal(t, "go1.26.8", s.config.GoVersion)
	require.Equal(t, "v1.9.0", s.config.ScannerVersion)
	require.ElementsMatch(t, []string{"GO-2026-6603", "GO-2026-6872", "GO-2026-6875"}, slices.Collect(maps.Keys(s.reached)))
	require.ElementsMatch(t, []string{"GO-2026-6603", "GO-2026-6842", "GO-2026-6872", "GO-2026-6875"}, slices.Collect(maps.Keys(s.found)))
	require.Equal(t, "net/http@go1.26.8 (fixed in go1.26.9)", where(s.reached["GO-2026-6603"]))
	require.Equal(t, "github.com/labstack/echo/v4@v4.16.0 (no fixed version)", where(s.reached["GO-2026-6872"]))
	require.Equal(t,
		"internal/notify/senders/senders.go:145: senders.(*WebhookSender).Send → io.Copy → io.copyBuffer → bufio.(*Writer).ReadFrom → http.(*response).ReadFrom",
		trace(s.reached["GO-2026-6603"]))
}

func TestDecide(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	tests := []struct {
		name       string
		exceptions exceptions
		want       verdict
		ok         bool
	}{{
		name:       "nothing listed: every reached vulnerability fails",
		exceptions: exceptions{},
		want: verdict{
			unlisted:  []string{"GO-2026-6603", "GO-2026-6872", "GO-2026-6875"},
			notCalled: []string{"GO-2026-6842"},
		},
	}, {
		name:       "the echo ones listed: the standard library's still fails",
		exceptions: exceptions{"GO-2026-6872": "r", "GO-2026-6875": "r"},
		want: verdict{
			unlisted:  []string{"GO-2026-6603"},
			excepted:  []string{"GO-2026-6872", "GO-2026-6875"},
			notCalled: []string{"GO-2026-6842"},
		},
	}, {
		name:       "all reached ones listed",
		exceptions: exceptions{"GO-2026-6603": "r", "GO-2026-6872": "r", "GO-2026-6875": "r"},
		want: verdict{
			excepted:  []string{"GO-2026-6603", "GO-2026-6872", "GO-2026-6875"},
			notCalled: []string{"GO-2026-6842"},
		},
		ok: true,
	}, {
		name: "an exception for one only imported, and one not found at all, are stale",
		exceptions: exceptions{"GO-2026-6603": "r", "GO-2026-6872": "r", "GO-2026-6875": "r",
			"GO-2026-6842": "r", "GO-2021-0001": "r"},
		want: verdict{
			excepted:  []string{"GO-2026-6603", "GO-2026-6872", "GO-2026-6875"},
			stale:     []string{"GO-2021-0001", "GO-2026-6842"},
			notCalled: []string{"GO-2026-6842"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := decide(s, tt.exceptions)
			require.Equal(t, tt.want, v)
			require.Equal(t, tt.ok, v.ok())
		})
	}
}

func TestPrintNamesWhatFails(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	ex := exceptions{"GO-2026-6872": "no RealIP", "GO-2026-6875": "no proxy", "GO-2021-0001": "gone"}
	var out bytes.Buffer
	decide(s, ex).print(&out, s, ex)
	text := out.String()
	require.Contains(t, text, "REACHED    GO-2026-6603  net/http@go1.26.8 (fixed in go1.26.9): HTTP/2 server memory exhaustion due to Trailer headers in net/http\n"+
		"           internal/notify/senders/senders.go:145: senders.(*WebhookSender).Send")
	require.Contains(t, text, "STALE      GO-2021-0001")
	require.Contains(t, text, "why: no RealIP")
	require.Contains(t, text, "not called GO-2026-6842")
	require.True(t, strings.HasSuffix(text, "vulncheck: FAIL: 1 reached and not listed as exceptions, 1 stale exceptions\n"), text)
}

func TestReadScanRefuses(t *testing.T) {
	t.Parallel()
	for name, stream := range map[string]string{
		"no config":           `{"finding":{"osv":"GO-2026-6603","trace":[{"module":"stdlib"}]}}`,
		"not a symbol scan":   `{"config":{"protocol_version":"v1.0.0","scan_level":"package"}}`,
		"another protocol":    `{"config":{"protocol_version":"v2.0.0","scan_level":"symbol"}}`,
		"a finding, no trace": `{"config":{"protocol_version":"v1.0.0","scan_level":"symbol"}}{"finding":{"osv":"GO-2026-6603"}}`,
		"not JSON":            `No vulnerabilities found.`,
	} {
		_, err := readScan(strings.NewReader(stream))
		require.Error(t, err, name)
	}
}

func TestParseExceptions(t *testing.T) {
	t.Parallel()
	ex, err := parseExceptions(strings.NewReader(`# a comment
GO-2026-6872  first line of the reason,
  its second line.

GO-2026-6875	tab-separated
`))
	require.NoError(t, err)
	require.Equal(t, exceptions{
		"GO-2026-6872": "first line of the reason, its second line.",
		"GO-2026-6875": "tab-separated",
	}, ex)

	for name, text := range map[string]string{
		"no reason":               "GO-2026-6872\nGO-2026-6875 why\n",
		"listed twice":            "GO-2026-6872 why\nGO-2026-6872 why again\n",
		"not an id":               "CVE-2026-1 why\n",
		"continuation before ids": "  why\nGO-2026-6872 why\n",
	} {
		_, err := parseExceptions(strings.NewReader(text))
		require.Error(t, err, name)
	}
}

// The checked-in file parses, every entry with its reason.
func TestExceptionsFile(t *testing.T) {
	t.Parallel()
	f, err := os.Open("exceptions.txt")
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read-only
	ex, err := parseExceptions(f)
	require.NoError(t, err)
	require.NotEmpty(t, ex)
}

func TestEnsureDB(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	const version = "v0.0.0-20261105234957-e22db6528018"
	// A built database is used as it is: no go command runs (this one does not exist).
	require.NoError(t, os.MkdirAll(filepath.Join(cache, version, "index"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(cache, version, "index", "modules.json"), []byte("[]"), 0o600))
	dir, err := ensureDB(context.Background(), "/nonexistent/go", cache, version, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(cache, version), dir)

	// A version has to be one: it names a directory.
	for _, v := range []string{"../../etc", "latest", "v1.0.0/x", ""} {
		_, err := ensureDB(context.Background(), "/nonexistent/go", cache, v, &bytes.Buffer{})
		require.ErrorContains(t, err, "not a module version", v)
	}
	// One not built yet runs the go command, whose failure is the error.
	_, err = ensureDB(context.Background(), "/nonexistent/go", cache, "v0.0.0-20200101000000-000000000000", &bytes.Buffer{})
	require.ErrorContains(t, err, "go mod download golang.org/x/vulndb@v0.0.0-20200101000000-000000000000")
	_, err = os.Stat(filepath.Join(cache, "v0.0.0-20200101000000-000000000000"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is left at the version's path")
}
