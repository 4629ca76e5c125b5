package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/e2etest"
	"github.com/walletsaga/walletsaga/internal/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

func TestDefaultsMatchTheDevStack(t *testing.T) {
	t.Parallel()
	cfg, _, err := parseConfig("notifier", nil, func(string) string { return "" }, &bytes.Buffer{}, nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8081", cfg.HTTPAddr)
	require.Equal(t, "wallet-notifier", cfg.ConsumerGroup)
	require.Equal(t, "wallet-events", cfg.Topic)
	err = run(context.Background(), nil, func(k string) string {
		return map[string]string{"CONSUMER_GROUP": "bad group!"}[k]
	}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "CONSUMER_GROUP")
}

func TestRunAnswersProbesAndStopsGracefully(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	_, dbURL := testdb.New(t)
	p := e2etest.Start(t, run, nil, map[string]string{"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv})
	resp, err := http.Get(p.BaseURL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, p.Stop(30*time.Second))
	require.Contains(t, p.Output(), "notifier stopped")
}
