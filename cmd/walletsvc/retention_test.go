package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
)

// TestRetentionSettings: the windows default to the documented ones; production refuses an
// idempotency window outside 24h–30d and short outbox, saga, operation and audit windows,
// naming the setting;
// dev takes seconds (a chaos run); finished sagas must outlive the keys that answer with them.
func TestRetentionSettings(t *testing.T) {
	t.Parallel()
	parse := func(env map[string]string) (config, error) { return binarytest.Config(parseConfig, "serve", env) }
	cfg, err := parse(binarytest.DevEnv(nil))
	require.NoError(t, err)
	require.Equal(t, retention.DefaultOutbox, cfg.RetentionOutbox)
	require.Equal(t, retention.DefaultSagas, cfg.RetentionSagas)
	require.Equal(t, 7*24*time.Hour, cfg.RetentionIdempotency)
	require.Equal(t, 30*24*time.Hour, cfg.RetentionOperations)
	require.Equal(t, 365*24*time.Hour, cfg.RetentionAudit)
	require.Equal(t, retention.DefaultBatch, cfg.RetentionBatch)

	cfg, err = parse(binarytest.DevEnv(map[string]string{"RETENTION_OUTBOX": "5s", "RETENTION_SAGAS": "5s", "RETENTION_IDEMPOTENCY": "5s",
		"RETENTION_OPERATIONS": "5s", "RETENTION_AUDIT": "5s"}))
	require.NoError(t, err, "dev takes seconds, so chaos can shorten every window")
	require.Equal(t, 5*time.Second, cfg.RetentionIdempotency)
	require.Equal(t, 5*time.Second, cfg.RetentionOperations)
	require.Equal(t, 5*time.Second, cfg.RetentionAudit)

	for _, c := range []struct{ env, value, want string }{
		{"RETENTION_IDEMPOTENCY", "1h", "RETENTION_IDEMPOTENCY: must be 24h0m0s–720h0m0s, got 1h0m0s"},
		{"RETENTION_IDEMPOTENCY", "0s", "RETENTION_IDEMPOTENCY: must be 24h0m0s–720h0m0s, got 0s"},
		{"RETENTION_IDEMPOTENCY", "744h", "RETENTION_IDEMPOTENCY: must be 24h0m0s–720h0m0s, got 744h0m0s"},
		{"RETENTION_OUTBOX", "5s", "RETENTION_OUTBOX: must be at least 1h0m0s or 0 (keep forever), got 5s"},
		{"RETENTION_SAGAS", "48h", "RETENTION_SAGAS: must be at least the idempotency key window (168h0m0s), got 48h0m0s"},
		{"RETENTION_BATCH", "0", "RETENTION_BATCH: must be 1–10000, got 0"},
		{"RETENTION_OPERATIONS", "1h", "RETENTION_OPERATIONS: must be at least 24h0m0s or 0 (keep forever), got 1h0m0s"},
		{"RETENTION_AUDIT", "168h", "RETENTION_AUDIT: must be at least 720h0m0s or 0 (keep forever), got 168h0m0s"},
	} {
		_, err := parse(map[string]string{c.env: c.value}) // production: WALLETSAGA_ENV unset
		require.ErrorContains(t, err, c.want, "%s=%s", c.env, c.value)
	}
	_, err = parse(binarytest.DevEnv(map[string]string{"RETENTION_IDEMPOTENCY": "1h", "RETENTION_SAGAS": "0"}))
	require.NoError(t, err, "sagas kept forever outlive any key")
	_, err = parse(map[string]string{"RETENTION_OPERATIONS": "0", "RETENTION_AUDIT": "0"})
	require.Error(t, err, "production without its tokens")
	require.NotContains(t, err.Error(), "RETENTION_OPERATIONS", "0 keeps them forever")
	require.NotContains(t, err.Error(), "RETENTION_AUDIT")
}
