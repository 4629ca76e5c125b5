package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

func sms(user, seq int64, phone string, amount int64) notify.SMS {
	return notify.SMS{UserID: user, Seq: seq, Phone: phone, Locale: "en", Kind: "deposit", Amount: amount,
		Text: "You topped up 1.00 CNY. Balance: 1.00 CNY.", IdempotencyKey: "1:1"}
}

func TestLogSenderWritesOnceInTheGivenTx(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	var out bytes.Buffer
	s := notify.NewLogSender(&out)
	m := sms(1, 1, "+8613800001234", 100)

	// Rolled back with the gate's transaction: no row.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Send(ctx, tx, m))
	require.NoError(t, tx.Rollback(ctx))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.sms_log`).Scan(&n))
	require.Zero(t, n)

	// Committed: one row; sending it again (a retried gate tx) adds nothing.
	for range 2 {
		require.NoError(t, pg.WithTx(ctx, pool, func(tx pgx.Tx) error { return s.Send(ctx, tx, m) }))
	}
	late := m
	late.Late = true
	require.NoError(t, pg.WithTx(ctx, pool, func(tx pgx.Tx) error { return s.Send(ctx, tx, late) }))
	require.NoError(t, pg.WithTx(ctx, pool, func(tx pgx.Tx) error { return s.Send(ctx, tx, late) }))

	rows, err := pool.Query(ctx, `SELECT user_id, seq, phone, text, late FROM notify.sms_log ORDER BY id`)
	require.NoError(t, err)
	type row struct {
		User, Seq   int64
		Phone, Text string
		Late        bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Equal(t, []row{
		{1, 1, "+8613800001234", m.Text, false},
		{1, 1, "+8613800001234", m.Text, true},
		{1, 1, "+8613800001234", m.Text, true},
	}, got)

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, "one line per inserted row, plus the rolled-back one: %q", out.String())
	require.Equal(t, `SMS user=1 seq=1 to=+*********1234 late=false text="You topped up 1.00 CNY. Balance: 1.00 CNY."`, lines[0])
	require.NotContains(t, out.String(), "13800001234")
	require.Contains(t, lines[3], "late=true")
}

func TestLogSenderNeedsATx(t *testing.T) {
	t.Parallel()
	err := notify.NewLogSender(nil).Send(context.Background(), nil, sms(1, 1, "+1", 1))
	require.ErrorContains(t, err, "no transaction")
	require.NotErrorIs(t, err, notify.ErrPermanent)
}

type capture struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (c *capture) add(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, r)
	c.body = append(c.body, b)
}

func TestWebhookSender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		wantErr   bool
		permanent bool
	}{
		{"200 ok", http.StatusOK, false, false},
		{"202 ok", http.StatusAccepted, false, false},
		{"500 retryable", http.StatusInternalServerError, true, false},
		{"503 retryable", http.StatusServiceUnavailable, true, false},
		{"400 permanent", http.StatusBadRequest, true, true},
		{"422 permanent", http.StatusUnprocessableEntity, true, true},
		{"408 retryable", http.StatusRequestTimeout, true, false},
		{"429 retryable", http.StatusTooManyRequests, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c capture
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.add(r)
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "provider says hi")
			}))
			t.Cleanup(srv.Close)
			s, err := notify.NewWebhookSender(srv.URL+"/sms", time.Second, srv.Client())
			require.NoError(t, err)
			m := sms(42, 7, "+8613800001234", 100)
			m.IdempotencyKey = "42:7"
			err = s.Send(context.Background(), nil, m)
			if !tc.wantErr {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.Equal(t, tc.permanent, errors.Is(err, notify.ErrPermanent), "%v", err)
				require.Contains(t, err.Error(), "provider says hi")
				require.Contains(t, err.Error(), "42:7")
			}
			require.Len(t, c.reqs, 1)
			r := c.reqs[0]
			require.Equal(t, http.MethodPost, r.Method)
			require.Equal(t, "/sms", r.URL.Path)
			require.Equal(t, "42:7", r.Header.Get("Idempotency-Key"))
			require.Equal(t, "application/json", r.Header.Get("Content-Type"))
			var body map[string]any
			require.NoError(t, json.Unmarshal(c.body[0], &body))
			require.Equal(t, map[string]any{"user_id": 42.0, "seq": 7.0, "phone": "+8613800001234", "text": m.Text, "late": false}, body)
		})
	}
}

func TestWebhookSenderLateKey(t *testing.T) {
	t.Parallel()
	var c capture
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.add(r) }))
	t.Cleanup(srv.Close)
	s, err := notify.NewWebhookSender(srv.URL, 0, srv.Client())
	require.NoError(t, err)
	m := notify.MarkLate(sms(3, 4, "+8613800001234", 100), 1)
	require.NoError(t, s.Send(context.Background(), nil, m))
	require.Equal(t, "3:4:late:1", c.reqs[0].Header.Get("Idempotency-Key"))
	require.Contains(t, string(c.body[0]), `"late":true`)
}

func TestWebhookSenderTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	s, err := notify.NewWebhookSender(srv.URL, 50*time.Millisecond, srv.Client())
	require.NoError(t, err)
	start := time.Now()
	err = s.Send(context.Background(), nil, sms(1, 1, "+1", 1))
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, notify.ErrPermanent)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestWebhookSenderConnectionErrorIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	s, err := notify.NewWebhookSender("http://"+addr+"/sms", time.Second, &http.Client{})
	require.NoError(t, err)
	err = s.Send(context.Background(), nil, sms(1, 1, "+1", 1))
	require.Error(t, err)
	require.NotErrorIs(t, err, notify.ErrPermanent)
}

func TestNewWebhookSenderChecksURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:8080", "ftp://x/y", "http://", "::"} {
		_, err := notify.NewWebhookSender(u, time.Second, nil)
		require.Error(t, err, u)
		require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	}
	_, err := notify.NewWebhookSender("http://x", -time.Second, nil)
	require.Error(t, err)
}

type recordingSender struct {
	mu   sync.Mutex
	sent []notify.SMS
	err  error
}

func (r *recordingSender) Send(_ context.Context, _ pgx.Tx, m notify.SMS) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.sent = append(r.sent, m)
	return nil
}

func TestFailureSwitch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		sw      func(inner notify.Sender) *notify.FailureSwitch
		phone   string
		amount  int64
		wantErr string
	}{
		{"default: ordinary SMS passes", notify.NewFailureSwitch, "+8613800001234", 10000, ""},
		{"default: phone ending 0000 fails", notify.NewFailureSwitch, "+8613800000000", 10000, "simulated failure: phone +*********0000"},
		{"default: 4.04 fails", notify.NewFailureSwitch, "+8613800001234", 404, "simulated failure: amount 404"},
		{"default: -4.04 fails", notify.NewFailureSwitch, "+8613800001234", -404, "simulated failure: amount -404"},
		{"default: 40.40 passes", notify.NewFailureSwitch, "+8613800001234", 4040, ""},
		{"disabled switches pass", func(in notify.Sender) *notify.FailureSwitch {
			return &notify.FailureSwitch{Inner: in}
		}, "+8613800000000", 404, ""},
		{"custom pattern", func(in notify.Sender) *notify.FailureSwitch {
			return &notify.FailureSwitch{Inner: in, PhonePattern: regexp.MustCompile(`^\+1555`)}
		}, "+15551234567", 1, "simulated failure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inner := &recordingSender{}
			err := tc.sw(inner).Send(context.Background(), nil, sms(1, 1, tc.phone, tc.amount))
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Len(t, inner.sent, 1)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.NotErrorIs(t, err, notify.ErrPermanent, "simulated failures are retried")
			require.Empty(t, inner.sent)
		})
	}
}

func TestParsePhonePattern(t *testing.T) {
	t.Parallel()
	for _, off := range []string{"", " ", "off", "NONE"} {
		re, err := notify.ParsePhonePattern(off)
		require.NoError(t, err)
		require.Nil(t, re)
	}
	re, err := notify.ParsePhonePattern(notify.DefaultFailPhonePattern)
	require.NoError(t, err)
	require.True(t, re.MatchString("+8613800000000"))
	require.False(t, re.MatchString("+8613800000001"))
	_, err = notify.ParsePhonePattern("([")
	require.Error(t, err)
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	require.Contains(t, err.Error(), `"(["`)
}
