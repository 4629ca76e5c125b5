package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
)

// TestRetentionSettings: the notifier's windows default to the documented ones, dev takes
// seconds, and production refuses windows below their floor, naming the setting.
func TestRetentionSettings(t *testing.T) {
	t.Parallel()
	parse := func(env map[string]string) (config, error) { return binarytest.Config(parseConfig, "run", env) }
	cfg, err := parse(binarytest.DevEnv(nil))
	require.NoError(t, err)
	require.Equal(t, retention.DefaultInbox, cfg.RetentionInbox)
	require.Equal(t, retention.DefaultSMSLog, cfg.RetentionSMSLog)
	require.Equal(t, time.Hour, cfg.RetentionWakes)
	require.Equal(t, 30*24*time.Hour, cfg.RetentionBadMessages)
	require.Equal(t, 365*24*time.Hour, cfg.RetentionAudit)
	cfg, err = parse(binarytest.DevEnv(map[string]string{"RETENTION_INBOX": "5s", "RETENTION_WAKES": "5s", "RETENTION_PAUSE": "0s",
		"RETENTION_BAD_MESSAGES": "5s", "RETENTION_AUDIT": "5s"}))
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, cfg.RetentionInbox)
	require.Equal(t, 5*time.Second, cfg.RetentionBadMessages)
	require.Equal(t, 5*time.Second, cfg.RetentionAudit)

	_, err = parse(map[string]string{"RETENTION_INBOX": "5s", "RETENTION_SMS_LOG": "30m", "RETENTION_WAKES": "2s",
		"RETENTION_BAD_MESSAGES": "30m", "RETENTION_AUDIT": "168h"})
	require.ErrorContains(t, err, "RETENTION_SMS_LOG: must be at least 1h0m0s or 0 (keep forever), got 30m0s")
	require.ErrorContains(t, err, "RETENTION_BAD_MESSAGES: must be at least 1h0m0s or 0 (keep forever), got 30m0s")
	require.ErrorContains(t, err, "RETENTION_AUDIT: must be at least 720h0m0s or 0 (keep forever), got 168h0m0s")
	require.ErrorContains(t, err, "RETENTION_INBOX: must be at least 1h0m0s or 0 (keep forever), got 5s")
	require.ErrorContains(t, err, "RETENTION_WAKES: must be at least 1m0s or 0 (keep forever), got 2s")
	_, err = parse(binarytest.DevEnv(map[string]string{"RETENTION_PAUSE": "2m"}))
	require.ErrorContains(t, err, "RETENTION_PAUSE: must be 0–1m, got 2m0s")
}
