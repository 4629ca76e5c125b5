package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/buildinfo"
	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

func fakeNotifier() metrics.Notifier {
	return metrics.Notifier{
		Lanes: func() gate.LaneStats {
			return gate.LaneStats{Sent: 7, Retried: 4, DeadLettered: 1, Postponed: 3,
				Records: 12, RecordFailures: 13, RecordsGivenUp: 14, RecordsRefused: 15, Fenced: 16}
		},
		Inbox:   func() inbox.Stats { return inbox.Stats{Received: 9, Ignored: 2, Bad: 1, Baselines: 5, Writes: 17} },
		Busy:    func() int64 { return 6 },
		Breaker: func() senders.BreakerState { return senders.BreakerState{State: "open", Opened: 2} },
		View: func(context.Context) (gate.View, error) {
			return gate.View{Pending: 11, Due: 4, GapAlerts: 2, OldestGap: 90}, nil
		},
		DLQBacklog:  func(context.Context) (int64, error) { return 3, nil },
		InboxWriter: func() groupcommit.Stats { return groupcommit.Stats{Groups: 20, Requests: 21, Rows: 22} },
		Recorder:    func() groupcommit.Stats { return groupcommit.Stats{Groups: 30, Requests: 31, Rows: 32} },
	}
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

func TestWalletsvcMetrics(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m := metrics.NewSaga(reg, func(context.Context) ([]saga.KindStateCount, error) {
		return []saga.KindStateCount{{Kind: "deposit", State: saga.Completed, Count: 3}, {Kind: "deposit", State: saga.NeedsAttention, Count: 1}}, nil
	})
	m.ObserveStep("deposit", "charge", "forward", saga.OutcomeRetry, 20*time.Millisecond)
	m.ObserveStep("deposit", "charge", "forward", saga.OutcomeDone, 10*time.Millisecond)
	metrics.NewOutbox(reg, func(context.Context) (wallet.Backlog, error) {
		return wallet.Backlog{Unpublished: 4, OldestAge: 2500 * time.Millisecond}, nil
	})
	observe := metrics.NewRelay(reg, func() ordering.RelayStats {
		return ordering.RelayStats{Published: 9, Active: true, Marks: groupcommit.Stats{Groups: 2, Requests: 5, Rows: 40}, Queues: []ordering.QueueStats{
			{Queue: ordering.Queue{Broker: "broker-a", ID: 0}, State: ordering.QueueIdle},
			{Queue: ordering.Queue{Broker: "broker-a", ID: 1}, State: ordering.QueueStuck, Lag: 12500 * time.Millisecond},
		}}
	})
	observe(3*time.Millisecond, nil)
	observe(time.Second, errors.New("broker down"))

	out := scrape(t, metrics.Handler(reg, nil))
	for _, want := range []string{
		`walletsaga_sagas{kind="deposit",state="completed"} 3`,
		`walletsaga_sagas{kind="deposit",state="needs_attention"} 1`,
		`walletsaga_sagas{kind="deposit",state="running"} 0`,
		`walletsaga_sagas{kind="deposit",state="resolved"} 0`,
		`walletsaga_saga_step_attempts_total{kind="deposit",outcome="retry",phase="forward",step="charge"} 1`,
		`walletsaga_saga_step_attempts_total{kind="deposit",outcome="done",phase="forward",step="charge"} 1`,
		`walletsaga_saga_step_duration_seconds_count{kind="deposit",phase="forward",step="charge"} 2`,
		`walletsaga_outbox_unpublished 4`,
		`walletsaga_outbox_oldest_unpublished_age_seconds 2.5`,
		`walletsaga_relay_send_duration_seconds_count{result="ok"} 1`,
		`walletsaga_relay_send_duration_seconds_count{result="error"} 1`,
		`walletsaga_relay_published_total 9`,
		`walletsaga_relay_active 1`,
		`walletsaga_relay_queue_lag_seconds{queue="broker-a/0"} 0`,
		`walletsaga_relay_queue_lag_seconds{queue="broker-a/1"} 12.5`,
		`walletsaga_relay_queue_state{queue="broker-a/0",state="idle"} 1`,
		`walletsaga_relay_queue_state{queue="broker-a/0",state="stuck"} 0`,
		`walletsaga_relay_queue_state{queue="broker-a/1",state="stuck"} 1`,
		`walletsaga_relay_queue_state{queue="broker-a/1",state="sending"} 0`,
		`walletsaga_relay_queue_state{queue="broker-a/1",state="backing_off"} 0`,
		`walletsaga_groupcommit_groups_total{writer="relay_marks"} 2`,
		`walletsaga_groupcommit_requests_total{writer="relay_marks"} 5`,
		`walletsaga_groupcommit_rows_total{writer="relay_marks"} 40`,
		`go_goroutines `,
	} {
		require.Contains(t, out, want)
	}
}

func TestNotifierMetrics(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	metrics.NewNotifier(reg, fakeNotifier())
	observe := metrics.NewSMS(reg)
	observe(5*time.Millisecond, nil)
	metrics.NewDLQ(reg, func(context.Context) (int64, error) { return 6, nil })

	out := scrape(t, metrics.Handler(reg, nil))
	for _, want := range []string{
		`walletsaga_notify_deliveries_total{outcome="sent"} 7`,
		`walletsaga_notify_deliveries_total{outcome="retried"} 4`,
		`walletsaga_notify_deliveries_total{outcome="dead_lettered"} 1`,
		`walletsaga_notify_deliveries_total{outcome="postponed"} 3`,
		`walletsaga_notify_inbox_messages_total{result="received"} 9`,
		`walletsaga_notify_inbox_messages_total{result="ignored"} 2`,
		`walletsaga_notify_inbox_messages_total{result="bad"} 1`,
		`walletsaga_notify_baselines_total 5`,
		`walletsaga_notify_inbox_writes_total 17`,
		`walletsaga_notify_record_statements_total 12`,
		`walletsaga_notify_record_failures_total 13`,
		`walletsaga_notify_records_given_up_total 14`,
		`walletsaga_notify_records_refused_total 15`,
		`walletsaga_notify_outcomes_fenced_total 16`,
		`walletsaga_groupcommit_groups_total{writer="inbox"} 20`,
		`walletsaga_groupcommit_requests_total{writer="inbox"} 21`,
		`walletsaga_groupcommit_rows_total{writer="inbox"} 22`,
		`walletsaga_groupcommit_groups_total{writer="lane_records"} 30`,
		`walletsaga_groupcommit_requests_total{writer="lane_records"} 31`,
		`walletsaga_groupcommit_rows_total{writer="lane_records"} 32`,
		`walletsaga_notify_lanes_busy 6`,
		`walletsaga_notify_breaker_state 2`,
		`walletsaga_notify_breaker_opened_total 2`,
		`walletsaga_notify_inbox_pending 11`,
		`walletsaga_notify_due_users 4`,
		`walletsaga_notify_gap_alerts 2`,
		`walletsaga_notify_oldest_gap_seconds 90`,
		`walletsaga_notify_dlq_unpublished 3`,
		`walletsaga_sms_send_duration_seconds_count{result="ok"} 1`,
		`walletsaga_sms_send_duration_seconds_count{result="error"} 0`,
		`walletsaga_dlq_depth 6`,
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "user_id", "no per-user label")
}

func TestAFailingScrapeQueryLeavesTheRestServed(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	metrics.NewDLQ(reg, func(context.Context) (int64, error) { return 0, errors.New("database down") })
	observe := metrics.NewSMS(reg)
	observe(time.Millisecond, nil)
	out := scrape(t, metrics.Handler(reg, slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.Contains(t, out, "walletsaga_sms_send_duration_seconds_count")
	require.False(t, strings.Contains(out, "walletsaga_dlq_depth "), "no made-up value")
}

// TestCommitToSMSLatency: the histogram has 1 s as a bucket boundary (the objective the
// alerting rules measure), and a negative latency (the clocks of the wallet's database and
// the notifier apart) counts as 0, not below every bucket.
func TestCommitToSMSLatency(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	observe := metrics.NewCommitToSMS(reg)
	for _, d := range []time.Duration{-time.Second, 300 * time.Millisecond, time.Second, 2 * time.Second, 20 * time.Minute} {
		observe(d)
	}
	out := scrape(t, metrics.Handler(reg, nil))
	for _, want := range []string{
		`walletsaga_notify_commit_to_sms_seconds_bucket{le="0.025"} 1`,
		`walletsaga_notify_commit_to_sms_seconds_bucket{le="1"} 3`,
		`walletsaga_notify_commit_to_sms_seconds_bucket{le="900"} 4`,
		`walletsaga_notify_commit_to_sms_seconds_bucket{le="+Inf"} 5`,
		`walletsaga_notify_commit_to_sms_seconds_count 5`,
	} {
		require.Contains(t, out, want)
	}
}

// TestFleetWideGaugesSayHowToAggregate: every gauge counted in the shared database at scrape
// time says in its Help that each replica reports the fleet's value, to be taken with max().
func TestFleetWideGaugesSayHowToAggregate(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	metrics.NewSaga(reg, func(context.Context) ([]saga.KindStateCount, error) {
		return []saga.KindStateCount{{Kind: "deposit", State: saga.Completed, Count: 1}}, nil
	})
	metrics.NewOutbox(reg, func(context.Context) (wallet.Backlog, error) { return wallet.Backlog{}, nil })
	metrics.NewNotifier(reg, fakeNotifier())
	metrics.NewDLQ(reg, func(context.Context) (int64, error) { return 0, nil })
	out := scrape(t, metrics.Handler(reg, nil))
	for _, name := range []string{
		"walletsaga_sagas", "walletsaga_outbox_unpublished", "walletsaga_outbox_oldest_unpublished_age_seconds",
		"walletsaga_notify_inbox_pending", "walletsaga_notify_due_users", "walletsaga_notify_gap_alerts",
		"walletsaga_notify_oldest_gap_seconds", "walletsaga_notify_dlq_unpublished", "walletsaga_dlq_depth",
	} {
		require.Regexp(t, `(?m)^# HELP `+name+` .*take max\(\) across replicas, not sum\(\)\.$`, out)
	}
	require.NotRegexp(t, `(?m)^# HELP walletsaga_notify_lanes_busy .*max\(\)`, out, "a gauge of this process is not fleet-wide")
}

func TestRetentionMetrics(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m := metrics.NewRetention(reg, "wallet_events", "sagas", "audit")
	m.Pruned("wallet_events", 1000)
	m.Pruned("wallet_events", 20)
	m.Oldest("sagas", 90*time.Second)
	m.Scheduled("sagas", time.Minute, time.Unix(1_700_000_000, 0))
	m.Scheduled("wallet_events", 15*time.Second, time.Unix(1_700_000_000, 0))
	m.Passed("wallet_events", time.Unix(1_700_000_042, 500_000_000))
	out := scrape(t, metrics.Handler(reg, nil))
	for _, want := range []string{
		`walletsaga_retention_pruned_rows_total{table="wallet_events"} 1020`,
		`walletsaga_retention_pruned_rows_total{table="sagas"} 0`,
		`walletsaga_retention_oldest_row_age_seconds{table="sagas"} 90`,
		`walletsaga_retention_oldest_row_age_seconds{table="wallet_events"} 0`,
		`walletsaga_retention_pass_interval_seconds{table="sagas"} 60`,
		`walletsaga_retention_pass_interval_seconds{table="wallet_events"} 15`,
		`walletsaga_retention_last_pass_timestamp_seconds{table="sagas"} 1.7e+09`,
		`walletsaga_retention_last_pass_timestamp_seconds{table="wallet_events"} 1.7000000425e+09`,
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, `walletsaga_retention_last_pass_timestamp_seconds{table="audit"}`,
		"a table the pruner does not prune (window 0) has no last pass: nothing to alert on")
	require.NotContains(t, out, `walletsaga_retention_pass_interval_seconds{table="audit"}`)
	require.Regexp(t, `(?m)^# HELP walletsaga_retention_oldest_row_age_seconds .*take max\(\) across replicas, not sum\(\)\.$`, out)
}

// TestBuildInfo: every registry serves walletsaga_build_info, 1, labelled with the build
// the process runs.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	i := buildinfo.Read()
	out := scrape(t, metrics.Handler(metrics.NewRegistry(), nil))
	require.Contains(t, out, fmt.Sprintf(`walletsaga_build_info{goversion=%q,revision=%q,version=%q} 1`, i.GoVersion, i.RevisionLabel(), i.Version))
}

// TestAFloodOfScrapesQueriesTheDatabaseOnce: a hundred scrapes at once, each hanging up at
// once, and the query behind the database-backed gauges runs once; it is not cut short by
// the scrapers that gave up, and a scrape after it is served from memory.
func TestAFloodOfScrapesQueriesTheDatabaseOnce(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	var queries atomic.Int32
	release := make(chan struct{})
	var cut atomic.Bool
	metrics.NewOutbox(reg, func(ctx context.Context) (wallet.Backlog, error) {
		queries.Add(1)
		<-release
		cut.Store(ctx.Err() != nil)
		return wallet.Backlog{Unpublished: 4}, nil
	})
	srv := httptest.NewServer(metrics.Handler(reg, nil))
	defer srv.Close()

	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			if resp, err := srv.Client().Do(req); err == nil {
				_ = resp.Body.Close()
			}
		})
	}
	wg.Wait()
	close(release)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, metrics.Handler(reg, nil)), "walletsaga_outbox_unpublished 4")
	},
		5*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, queries.Load(), "one query, however many scrapes")
	require.False(t, cut.Load(), "the scrapers that hung up did not cancel the query")
	scrape(t, metrics.Handler(reg, nil))
	require.EqualValues(t, 1, queries.Load(), "a scrape within RefreshEvery is served from memory")
}

// TestScrapesPastTheBoundAreRefused: while MaxScrapesInFlight scrapes wait for the first query
// (the database slow), one more is answered 503 at once rather than queued.
func TestScrapesPastTheBoundAreRefused(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	release := make(chan struct{})
	metrics.NewOutbox(reg, func(context.Context) (wallet.Backlog, error) {
		<-release
		return wallet.Backlog{}, nil
	})
	srv := httptest.NewServer(metrics.Handler(reg, nil))
	defer srv.Close()
	var wg sync.WaitGroup
	for range metrics.MaxScrapesInFlight {
		wg.Go(func() {
			if resp, err := srv.Client().Get(srv.URL); err == nil {
				_ = resp.Body.Close()
			}
		})
	}
	// A scrape let in waits for the query too: it hangs up, and the next is tried.
	impatient := &http.Client{Timeout: 200 * time.Millisecond}
	require.Eventually(t, func() bool {
		resp, err := impatient.Get(srv.URL)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 2*metrics.ScrapeTimeout, 20*time.Millisecond, "a scrape past the bound is refused")
	close(release)
	wg.Wait()
}
