package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/reqid"
)

func TestJSONLoggerWritesOneObjectPerLineWithTheRequestID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := cli.Logger(&buf, "json", "info")
	require.NoError(t, err)
	log.InfoContext(reqid.With(context.Background(), "rid-1"), "hello", "user_id", 7)
	log.Debug("hidden at info")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec), buf.String())
	require.Equal(t, "hello", rec["msg"])
	require.Equal(t, "INFO", rec["level"])
	require.Equal(t, "rid-1", rec["request_id"])
	require.Equal(t, 7.0, rec["user_id"])

	buf.Reset()
	log, err = cli.Logger(&buf, "text", "debug")
	require.NoError(t, err)
	log.DebugContext(reqid.With(context.Background(), "rid-2"), "hi")
	require.Contains(t, buf.String(), "request_id=rid-2")

	_, err = cli.Logger(&buf, "xml", "info")
	require.ErrorContains(t, err, "LOG_FORMAT")
	_, err = cli.Logger(&buf, "json", "loud")
	require.ErrorContains(t, err, "LOG_LEVEL")
}

func TestSecretsAreNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "top-secret-value-123"
	var help bytes.Buffer
	f := cli.NewFlags("x", func(k string) string { return map[string]string{"API_TOKEN": secret}[k] }, &help)
	var tok string
	f.Secret(&tok, "API_TOKEN", "a token")
	require.NoError(t, f.Parse(nil))
	require.Equal(t, secret, tok, "read from the environment")
	f.FlagSet().Usage()
	require.Contains(t, help.String(), "API_TOKEN")
	require.NotContains(t, help.String(), secret)

	require.NoError(t, f.Parse([]string{"-API_TOKEN", "from-flag-0123456"}))
	require.Equal(t, "from-flag-0123456", tok)

	file := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(file, []byte(secret+"\n"), 0o600))
	got, err := cli.ReadSecret("API_TOKEN_FILE", "ignored", file)
	require.NoError(t, err)
	require.Equal(t, secret, got)
	_, err = cli.ReadSecret("API_TOKEN_FILE", "", filepath.Join(t.TempDir(), "missing"))
	require.ErrorContains(t, err, "API_TOKEN_FILE")
	got, err = cli.ReadSecret("API_TOKEN_FILE", "v", "")
	require.NoError(t, err)
	require.Equal(t, "v", got)
}

func TestWriteAddrFileWritesTheBoundAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	path := filepath.Join(t.TempDir(), "addr")
	require.NoError(t, cli.WriteAddrFile(path, ln.Addr()))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, ln.Addr().String()+"\n", string(b))
	require.NotContains(t, string(b), ":0\n", "the port the listener got, not the one asked for")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left beside it")

	require.NoError(t, cli.WriteAddrFile("", ln.Addr()), "no path, nothing written")
	require.Error(t, cli.WriteAddrFile(filepath.Join(t.TempDir(), "missing", "addr"), ln.Addr()))
}
