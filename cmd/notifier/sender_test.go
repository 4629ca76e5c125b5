package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
)

// The webhook sender as the notifier wires it presents SMS_WEBHOOK_TOKEN to the provider,
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

	s, err := newSender(config{Sender: "webhook", WebhookURL: provider.URL + "/sms", WebhookToken: token, Workers: 2, SendTimeout: time.Second}, io.Discard)
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
