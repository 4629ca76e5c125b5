package senders_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func sms(user, seq int64, phone string, amount int64) notify.SMS {
	return notify.SMS{UserID: user, Seq: seq, Phone: phone, Locale: "en", Kind: "deposit", Amount: amount, Currency: "CNY", BalanceAfter: 100,
		Text: "You topped up 1.00 CNY. Balance: 1.00 CNY.", IdempotencyKey: "1:1"}
}

func TestLogSenderWritesALineAndIsJournaled(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := senders.NewLogSender(&out)
	require.True(t, notify.IsJournaled(s), "its delivery is the SMS log row the lane writes")
	require.True(t, notify.IsJournaled(&senders.FailureSwitch{Inner: s}))
	require.True(t, notify.IsJournaled(senders.ObservedSender{Inner: s}))
	w, err := senders.NewWebhookSender("http://127.0.0.1:1/sms", time.Second, nil)
	require.NoError(t, err)
	require.False(t, notify.IsJournaled(w))
	require.False(t, notify.IsJournaled(&senders.FailureSwitch{Inner: w}))

	require.NoError(t, s.Send(context.Background(), sms(1, 1, "+8613800001234", 100)))
	require.Equal(t, `SMS user=1 seq=1 to=+*********1234 late=false text="You topped up 1.00 CNY. Balance: 1.00 CNY."`+"\n", out.String())
	require.NotContains(t, out.String(), "13800001234")
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
		name     string
		status   int
		replayed string // the Idempotent-Replayed header's value ("": none)
		want     error  // nil: success; else the class the error must wrap
	}{
		{"200 ok", http.StatusOK, "", nil},
		{"202 ok", http.StatusAccepted, "", nil},
		{"200 replayed: delivered already", http.StatusOK, "true", notify.ErrAlreadyDelivered},
		{"201 replayed, spelled otherwise", http.StatusCreated, " TRUE", notify.ErrAlreadyDelivered},
		{"200 not replayed", http.StatusOK, "false", nil},
		{"409: a send under the key is in progress, never delivered", http.StatusConflict, "", notify.ErrInProgress},
		{"409 replayed is still 409", http.StatusConflict, "true", notify.ErrInProgress},
		{"500 provider-wide", http.StatusInternalServerError, "", notify.ErrProviderUnavailable},
		{"503 provider-wide", http.StatusServiceUnavailable, "", notify.ErrProviderUnavailable},
		{"408 provider-wide", http.StatusRequestTimeout, "", notify.ErrProviderUnavailable},
		{"429 provider-wide", http.StatusTooManyRequests, "", notify.ErrProviderUnavailable},
		{"401 provider-wide: our token refused", http.StatusUnauthorized, "", notify.ErrProviderUnavailable},
		{"403 provider-wide: our token refused", http.StatusForbidden, "", notify.ErrProviderUnavailable},
		{"400 permanent", http.StatusBadRequest, "", notify.ErrPermanent},
		{"422 permanent", http.StatusUnprocessableEntity, "", notify.ErrPermanent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c capture
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.add(r)
				if tc.replayed != "" {
					w.Header().Set(senders.HeaderReplayed, tc.replayed)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "provider says hi")
			}))
			t.Cleanup(srv.Close)
			s, err := senders.NewWebhookSender(srv.URL+"/sms", time.Second, srv.Client())
			require.NoError(t, err)
			m := sms(42, 7, "+8613800001234", 100)
			m.IdempotencyKey = "42:7"
			err = s.Send(context.Background(), m)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
				for _, other := range []error{notify.ErrAlreadyDelivered, notify.ErrInProgress, notify.ErrProviderUnavailable, notify.ErrPermanent} {
					if !errors.Is(other, tc.want) {
						require.NotErrorIs(t, err, other)
					}
				}
				if !errors.Is(tc.want, notify.ErrAlreadyDelivered) {
					require.Contains(t, err.Error(), "provider says hi")
				}
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
			require.Equal(t, map[string]any{"user_id": 42.0, "seq": 7.0, "phone": "+8613800001234", "text": m.Text, "late": false,
				"locale": "en", "template": "deposit", "params": map[string]any{"amount": "1.00", "currency": "CNY", "balance_after": "1.00"}}, body)
			require.Zero(t, notify.RetryAfter(err), "no Retry-After: the policy's own backoff")
		})
	}
}

// TestWebhookClientReusesConnections: lanes that send, record, and send again reuse their
// connections to the provider instead of opening one per SMS (http.DefaultClient keeps only
// two idle per host, and closes the others' connections while they record).
func TestWebhookClientReusesConnections(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	opened := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	const lanes, each = 16, 10
	s, err := senders.NewWebhookSender(srv.URL, time.Second, senders.NewWebhookClient(lanes))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for l := range lanes {
		wg.Go(func() {
			for i := range each {
				require.NoError(t, s.Send(context.Background(), sms(int64(l+1), int64(i+1), "+8613800000001", 100)))
				time.Sleep(5 * time.Millisecond) // the lane records the SMS before its next
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// At most one connection per lane, give or take one that was on its way back to the
	// idle pool when its lane's next request started.
	require.LessOrEqual(t, opened, 2*lanes, "connections opened for %d SMS", lanes*each)
}

// TestWebhookSenderCleansABrokenReply: a provider's reply cut inside a multi-byte character
// and carrying a NUL becomes a failure reason of clean text (Postgres refuses the bytes as
// they came, SQLSTATE 22021, and the lane records the reason).
func TestWebhookSenderCleansABrokenReply(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "维护\x00中"[:len("维护\x00中")-1])
	}))
	t.Cleanup(srv.Close)
	s, err := senders.NewWebhookSender(srv.URL, time.Second, srv.Client())
	require.NoError(t, err)
	m := sms(5, 1, "+8613800001234", 100)
	m.IdempotencyKey = "d:5:1"
	err = s.Send(context.Background(), m)
	require.ErrorIs(t, err, notify.ErrProviderUnavailable)
	require.True(t, utf8.ValidString(err.Error()), "%q", err.Error())
	require.NotContains(t, err.Error(), "\x00")
	require.Contains(t, err.Error(), "维护\ufffd\ufffd")
}

func TestWebhookSenderLateKeepsTheKey(t *testing.T) {
	t.Parallel()
	var c capture
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { c.add(r) }))
	t.Cleanup(srv.Close)
	s, err := senders.NewWebhookSender(srv.URL, 0, srv.Client())
	require.NoError(t, err)
	m := sms(3, 4, "+8613800001234", 100)
	m.IdempotencyKey = "3:4"
	require.NoError(t, s.Send(context.Background(), notify.MarkLate(m)))
	require.Equal(t, "3:4", c.reqs[0].Header.Get("Idempotency-Key"))
	require.Contains(t, string(c.body[0]), `"late":true`)
}

// A provider that redirects gets the SMS and the token once, and whatever it names gets
// nothing: the redirect is refused as a failure of the provider as a whole (retried and
// counted by the breaker, never dead-lettered), whichever client the sender was given.
func TestWebhookSenderRefusesRedirects(t *testing.T) {
	t.Parallel()
	const token = "sms-provider-token-0123456789"
	var elsewhere capture
	target := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { elsewhere.add(r) }))
	t.Cleanup(target.Close)
	clients := map[string]func() *http.Client{
		"the webhook client": func() *http.Client { return senders.NewWebhookClient(2) },
		"none (the default)": func() *http.Client { return nil },
		"one that follows":   func() *http.Client { return &http.Client{} },
	}
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for name, client := range clients {
			t.Run(fmt.Sprintf("%d, %s", status, name), func(t *testing.T) {
				t.Parallel()
				var provider capture
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					provider.add(r)
					loc := "http://user:pw@" + target.Listener.Addr().String() + "/sms?key=loc-secret"
					w.Header().Set("Location", loc)
					w.WriteHeader(status)
					_, _ = io.WriteString(w, `<a href="`+loc+`">moved</a>`)
				}))
				t.Cleanup(srv.Close)
				s, err := senders.NewWebhookSender(srv.URL+"/sms", time.Second, client())
				require.NoError(t, err)
				s.Token = token
				err = s.Send(context.Background(), sms(9, 1, "+8613800009999", 100))
				require.ErrorIs(t, err, notify.ErrProviderUnavailable)
				require.NotErrorIs(t, err, notify.ErrPermanent)
				require.NotErrorIs(t, err, notify.ErrAlreadyDelivered)
				require.NotErrorIs(t, err, notify.ErrInProgress)
				require.Contains(t, err.Error(), "redirect")
				require.Contains(t, err.Error(), target.Listener.Addr().String(), "it says where the provider pointed")
				for _, secret := range []string{token, "pw", "loc-secret", "13800009999"} {
					require.NotContains(t, err.Error(), secret)
				}
				require.Len(t, provider.reqs, 1)
				require.Equal(t, "Bearer "+token, provider.reqs[0].Header.Get("Authorization"))
			})
		}
	}
	t.Cleanup(func() {
		elsewhere.mu.Lock()
		defer elsewhere.mu.Unlock()
		require.Empty(t, elsewhere.reqs, "the redirect's target got a request")
	})
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
	s, err := senders.NewWebhookSender(srv.URL, 50*time.Millisecond, srv.Client())
	require.NoError(t, err)
	start := time.Now()
	err = s.Send(context.Background(), sms(1, 1, "+1", 1))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, notify.ErrProviderUnavailable)
	require.NotErrorIs(t, err, notify.ErrPermanent)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestWebhookSenderConnectionErrorIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	s, err := senders.NewWebhookSender("http://"+addr+"/sms", time.Second, &http.Client{})
	require.NoError(t, err)
	err = s.Send(context.Background(), sms(1, 1, "+1", 1))
	require.ErrorIs(t, err, notify.ErrProviderUnavailable)
	require.NotErrorIs(t, err, notify.ErrPermanent)
}

// A send's error becomes the SMS's failure reason, stored and logged: it names the
// provider's host, path and parameters, never a user, password or key of SMS_WEBHOOK_URL
// (redact.URL).
func TestWebhookSenderErrorsNameTheURLWithoutCredentials(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	s, err := senders.NewWebhookSender("http://acct:s3cret@"+addr+"/sms?api_key=k3y", time.Second, senders.NewWebhookClient(1))
	require.NoError(t, err)
	err = s.Send(context.Background(), sms(1, 1, "+8613800001234", 1))
	require.ErrorIs(t, err, notify.ErrProviderUnavailable)
	require.Contains(t, err.Error(), "http://"+addr+"/sms?api_key=xxxxx")
	for _, secret := range []string{"acct", "s3cret", "k3y"} {
		require.NotContains(t, err.Error(), secret)
	}
	_, err = senders.NewWebhookSender("ftp://acct:s3cret@host/sms?api_key=k3y", time.Second, nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	require.NotContains(t, err.Error(), "k3y")
}

func TestNewWebhookSenderChecksURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:8080", "ftp://x/y", "http://", "::"} {
		_, err := senders.NewWebhookSender(u, time.Second, nil)
		require.Error(t, err, u)
		require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	}
	_, err := senders.NewWebhookSender("http://x", -time.Second, nil)
	require.Error(t, err)
}

type recordingSender struct {
	mu   sync.Mutex
	sent []notify.SMS
	err  error
}

func (r *recordingSender) Send(_ context.Context, m notify.SMS) error {
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
		sw      func(inner notify.Sender) *senders.FailureSwitch
		phone   string
		amount  int64
		wantErr string
	}{
		{"demo: ordinary SMS passes", senders.NewFailureSwitch, "+8613800001234", 10000, ""},
		{"demo: phone ending 0000 fails", senders.NewFailureSwitch, "+8613800000000", 10000, "simulated failure: phone +*********0000"},
		{"demo: 4.04 fails", senders.NewFailureSwitch, "+8613800001234", 404, "simulated failure: amount 404"},
		{"demo: -4.04 fails", senders.NewFailureSwitch, "+8613800001234", -404, "simulated failure: amount -404"},
		{"demo: 40.40 passes", senders.NewFailureSwitch, "+8613800001234", 4040, ""},
		{"disabled switches pass", func(in notify.Sender) *senders.FailureSwitch {
			return &senders.FailureSwitch{Inner: in}
		}, "+8613800000000", 404, ""},
		{"custom pattern", func(in notify.Sender) *senders.FailureSwitch {
			return &senders.FailureSwitch{Inner: in, PhonePattern: regexp.MustCompile(`^\+1555`)}
		}, "+15551234567", 1, "simulated failure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inner := &recordingSender{}
			err := tc.sw(inner).Send(context.Background(), sms(1, 1, tc.phone, tc.amount))
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Len(t, inner.sent, 1)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.NotErrorIs(t, err, notify.ErrPermanent, "simulated failures are retried")
			require.NotErrorIs(t, err, notify.ErrProviderUnavailable, "and are one SMS's failure, not the provider's")
			require.Empty(t, inner.sent)
		})
	}
}

func TestParsePhonePattern(t *testing.T) {
	t.Parallel()
	for _, off := range []string{"", " ", "off", "NONE"} {
		re, err := senders.ParsePhonePattern(off)
		require.NoError(t, err)
		require.Nil(t, re)
	}
	re, err := senders.ParsePhonePattern(senders.DemoFailPhonePattern)
	require.NoError(t, err)
	require.True(t, re.MatchString("+8613800000000"))
	require.False(t, re.MatchString("+8613800000001"))
	_, err = senders.ParsePhonePattern("([")
	require.Error(t, err)
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	require.Contains(t, err.Error(), `"(["`)
}

// TestWebhookSenderCarriesTheTemplate: beside the text, the body names the provider template
// of the SMS (its kind), its language and its parameters, for a provider that sends only
// templates approved beforehand; a replay keeps them, marked late.
func TestWebhookSenderCarriesTheTemplate(t *testing.T) {
	t.Parallel()
	var c capture
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { c.add(r) }))
	t.Cleanup(srv.Close)
	s, err := senders.NewWebhookSender(srv.URL, 0, srv.Client())
	require.NoError(t, err)
	ev := walletevent.Event{V: walletevent.Version, EventID: 41, UserID: 7, Seq: 3, Kind: walletevent.Purchase, Amount: -5000,
		Currency: "CNY", BalanceAfter: 1234567, SagaID: 12, Phone: "+8613800001234", Locale: "zh_CN", Epoch: 1, EpochSince: 1}
	m, err := notify.Render(ev)
	require.NoError(t, err)
	m.IdempotencyKey = "d:7:3:1"
	require.NoError(t, s.Send(context.Background(), m))
	require.NoError(t, s.Send(context.Background(), notify.MarkLate(m)))
	require.Len(t, c.body, 2)
	for i, late := range []bool{false, true} {
		var body map[string]any
		require.NoError(t, json.Unmarshal(c.body[i], &body))
		require.Equal(t, "purchase", body["template"])
		require.Equal(t, "zh-CN", body["locale"], "the language the text is in")
		require.Equal(t, map[string]any{"amount": "50.00", "currency": "CNY", "balance_after": "12345.67"}, body["params"])
		require.Equal(t, late, body["late"])
		require.Contains(t, body["text"], "50.00 CNY", "the text is still there")
	}
}

// TestWebhookSenderReadsRetryAfter: a 409, 429 or 503 with Retry-After asks for that wait
// before the next attempt (seconds or a date), read up to MaxRetryAfter however large or
// long; an unreadable one, one gone by, or one on another status asks for none.
func TestWebhookSenderReadsRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		want       time.Duration
		class      error
	}{
		{"429 seconds", http.StatusTooManyRequests, "7", 7 * time.Second, notify.ErrProviderUnavailable},
		{"503 seconds", http.StatusServiceUnavailable, "3", 3 * time.Second, notify.ErrProviderUnavailable},
		{"409 in progress: ask again later", http.StatusConflict, "2", 2 * time.Second, notify.ErrInProgress},
		{"429 a date", http.StatusTooManyRequests, time.Now().Add(time.Hour / 2).UTC().Format(http.TimeFormat), 30 * time.Minute, notify.ErrProviderUnavailable},
		{"429 a date gone by", http.StatusTooManyRequests, time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, notify.ErrProviderUnavailable},
		{"429 huge", http.StatusTooManyRequests, "31536000", senders.MaxRetryAfter, notify.ErrProviderUnavailable},
		{"429 past int64", http.StatusTooManyRequests, "999999999999999999999999", senders.MaxRetryAfter, notify.ErrProviderUnavailable},
		{"429 malformed", http.StatusTooManyRequests, "in a bit", 0, notify.ErrProviderUnavailable},
		{"503 negative", http.StatusServiceUnavailable, "-5", 0, notify.ErrProviderUnavailable},
		{"500 ignores it", http.StatusInternalServerError, "7", 0, notify.ErrProviderUnavailable},
		{"400 is permanent whatever it says", http.StatusBadRequest, "7", 0, notify.ErrPermanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", tc.retryAfter)
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			s, err := senders.NewWebhookSender(srv.URL, time.Second, srv.Client())
			require.NoError(t, err)
			err = s.Send(context.Background(), sms(1, 1, "+8613800001234", 100))
			require.ErrorIs(t, err, tc.class)
			got := notify.RetryAfter(err)
			if tc.want >= time.Minute {
				require.InDelta(t, tc.want.Seconds(), got.Seconds(), 2, "a date is read against the clock")
			} else {
				require.Equal(t, tc.want, got)
			}
		})
	}
}
