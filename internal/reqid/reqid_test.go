package reqid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/reqid"
)

func TestHandlerAddsTheRequestIDOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(reqid.Handler(reqid.Handler(slog.NewJSONHandler(&buf, nil)))).With("component", "x")
	ctx := reqid.With(context.Background(), "abc123")
	log.InfoContext(ctx, "hello", "n", 1)
	log.Info("no context")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	require.NoError(t, json.Unmarshal(lines[1], &second))
	require.Equal(t, "abc123", first["request_id"])
	require.Equal(t, "x", first["component"])
	require.Equal(t, 1, bytes.Count(lines[0], []byte("request_id")))
	require.NotContains(t, second, "request_id")
	require.Equal(t, "", reqid.From(context.Background()))
}
