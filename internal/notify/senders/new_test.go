package senders_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
)

// The webhook sender New builds presents SMS_WEBHOOK_TOKEN to the provider,
// and to no one else: a provider answering 307 to another server gets the SMS once, as a
// failure of the provider to retry, and that server gets no request at all, so neither the
// token, nor the phone number, nor the text.
func TestTheWebhookTokenGoesToTheProviderOnly(t *testing.T) {
	t.Parallel()
	const token = "sms-webhook-token-0123456789"
	var mu sync.Mutex
	var elsewhere []string
	target := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		elsewhere = append(elsewhere, r.Header.Get("Authorization")+" "+string(b))
	}))
	t.Cleanup(target.Close)
	var auth []string
	redirect := true
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auth = append(auth, r.Header.Get("Authorization"))
		if redirect {
			http.Redirect(w, r, target.URL+"/sms", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(provider.Close)

	s, err := senders.New(senders.Settings{Kind: "webhook", WebhookURL: provider.URL + "/sms", WebhookToken: token, Conns: 2, Timeout: time.Second, Out: io.Discard})
	require.NoError(t, err)
	m := notify.SMS{UserID: 7, Seq: 1, Phone: "+8613800007777", Text: "You topped up 1.00 CNY.", IdempotencyKey: "d:7:1"}
	err = s.Send(t.Context(), m)
	require.ErrorIs(t, err, notify.ErrProviderUnavailable, "retried like any provider failure, never dead-lettered")
	require.Contains(t, err.Error(), "redirect")
	require.NotContains(t, err.Error(), token)

	mu.Lock()
	redirect = false
	mu.Unlock()
	require.NoError(t, s.Send(t.Context(), m))

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, elsewhere, "the redirect's target got a request")
	require.Equal(t, []string{"Bearer " + token, "Bearer " + token}, auth, "the provider gets the token on each request")
}

// New builds the log sender unless the webhook is chosen, refuses a bad webhook URL, and
// wraps either in the failure switches only when one is set.
func TestNewChoosesTheSender(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s, err := senders.New(senders.Settings{Kind: "log", Out: &out})
	require.NoError(t, err)
	require.IsType(t, &senders.LogSender{}, s)
	require.Same(t, &out, s.(*senders.LogSender).Out)
	require.True(t, notify.IsJournaled(s))

	s, err = senders.New(senders.Settings{Kind: "webhook", WebhookURL: "https://sms.example/send", WebhookToken: "tok", Timeout: time.Second, Conns: 1})
	require.NoError(t, err)
	require.IsType(t, &senders.WebhookSender{}, s)
	require.Equal(t, "tok", s.(*senders.WebhookSender).Token)
	require.False(t, notify.IsJournaled(s))

	_, err = senders.New(senders.Settings{Kind: "webhook", WebhookURL: "not a url", Timeout: time.Second, Conns: 1})
	require.Error(t, err)

	phone := regexp.MustCompile("0000$")
	s, err = senders.New(senders.Settings{Kind: "log", FailPhone: phone, Out: &out})
	require.NoError(t, err)
	sw, ok := s.(*senders.FailureSwitch)
	require.True(t, ok, "a phone pattern wraps the sender in the failure switch")
	require.Same(t, phone, sw.PhonePattern)
	require.Zero(t, sw.FailAmount)
	require.IsType(t, &senders.LogSender{}, sw.Inner)
	require.True(t, notify.IsJournaled(s), "the switch is as journaled as what it wraps")

	s, err = senders.New(senders.Settings{Kind: "log", FailAmount: 404, Out: &out})
	require.NoError(t, err)
	require.Equal(t, int64(404), s.(*senders.FailureSwitch).FailAmount)
}
