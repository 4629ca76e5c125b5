package contracts_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// verdict is what the system makes of one answer to a client's call.
type verdict string

const (
	success      verdict = "success"       // done: a charge made, an SMS recorded sent
	finalFailure verdict = "final failure" // given up: a saga step failed, an SMS dead-lettered
	retryLater   verdict = "retry later"   // asked again, under the same key, after a backoff
)

// sagaVerdict is what the saga engine makes of a remote call's error (wallet's
// remoteOutcome): nil is done, a permanent RemoteError fails the step, anything else is
// asked again.
func sagaVerdict(err error) verdict {
	if err == nil {
		return success
	}
	if _, permanent := wallet.IsPermanent(err); permanent {
		return finalFailure
	}
	return retryLater
}

// smsVerdict is what the notifier's lanes make of a send's error: the retry policy's
// decision, on the first attempt and on one late in the policy (attempts spent, the window
// not), so that an answer which is no delivery is neither recorded sent nor dead-lettered
// early.
func smsVerdict(err error) verdict {
	p := gate.DefaultRetryPolicy
	first := p.Decide(gate.Attempt{Err: err}, func(int64) int64 { return 0 })
	late := p.Decide(gate.Attempt{Prior: p.MaxAttempts, Age: p.DeadLetterAfter / 2, Err: err}, func(int64) int64 { return 0 })
	for _, d := range []gate.Decision{first, late} {
		switch d.Verdict {
		case gate.Sent:
			return success
		case gate.DeadLettered:
			return finalFailure
		}
	}
	return retryLater
}

// client is one provider client of walletsaga, calling the provider at url once under key.
type client struct {
	name    string
	call    func(ctx context.Context, url, key string) error
	verdict func(error) verdict
	// inProgress reports whether err says "in progress" in the client's own terms.
	inProgress func(error) bool
}

const token = "contract-test-token-0123456789"

func gateway(t *testing.T, url string) *provider.Gateway {
	t.Helper()
	gw, err := provider.NewGateway(provider.Options{URL: url, Token: token, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return gw
}

func merchant(t *testing.T, url string) *provider.Merchant {
	t.Helper()
	m, err := provider.NewMerchant(provider.Options{URL: url, Token: token, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return m
}

// remoteInProgress: the adapters' code for 409.
func remoteInProgress(err error) bool {
	var re *wallet.RemoteError
	return errors.As(err, &re) && re.Code == provider.CodeInProgress
}

// smsNotDelivered: the sender's error for 409 is neither "delivered before" nor "refused
// for good" (nor "the provider is down", which the breaker would count against it), and
// says what the provider answered. (The sender's tests hold it to notify.ErrInProgress.)
func smsNotDelivered(err error) bool {
	return !errors.Is(err, notify.ErrAlreadyDelivered) && !errors.Is(err, notify.ErrPermanent) &&
		!errors.Is(err, notify.ErrProviderUnavailable) && strings.Contains(err.Error(), "409")
}

// clients lists every provider client: a new one belongs here.
func clients(t *testing.T) []client {
	t.Helper()
	return []client{
		{"payment gateway: charge", func(ctx context.Context, url, key string) error {
			_, err := gateway(t, url).Charge(ctx, key, 1, 100, "CNY", "card")
			return err
		}, sagaVerdict, remoteInProgress},
		{"payment gateway: refund by charge key", func(ctx context.Context, url, key string) error {
			return gateway(t, url).RefundByKey(ctx, key, "1-k:charge")
		}, sagaVerdict, remoteInProgress},
		{"payment gateway: payout", func(ctx context.Context, url, key string) error {
			_, err := gateway(t, url).Payout(ctx, key, 1, 100, "CNY", "bank")
			return err
		}, sagaVerdict, remoteInProgress},
		{"payment gateway: payout cancellation", func(ctx context.Context, url, key string) error {
			return gateway(t, url).CancelPayout(ctx, key, "1-k:payout")
		}, sagaVerdict, remoteInProgress},
		{"merchant: order", func(ctx context.Context, url, key string) error {
			_, err := merchant(t, url).PlaceOrder(ctx, key, "coffee", "r-1", 100, "CNY")
			return err
		}, sagaVerdict, remoteInProgress},
		{"merchant: order cancellation", func(ctx context.Context, url, key string) error {
			return merchant(t, url).CancelOrder(ctx, key, "1-k:order")
		}, sagaVerdict, remoteInProgress},
		{"SMS provider: send", func(ctx context.Context, url, key string) error {
			s, err := senders.NewWebhookSender(url+"/sms", 5*time.Second, nil)
			require.NoError(t, err)
			s.Token = token
			return s.Send(ctx, notify.SMS{UserID: 1, Seq: 1, Phone: "+8613800001234", Text: "You topped up 1.00 CNY.", IdempotencyKey: key})
		}, smsVerdict, smsNotDelivered},
	}
}

// Every provider client reads a 409 as "in progress: ask again later", never as success nor
// as a final failure, whether the 409 carries the contract's error body or none, and asks
// again under the same key.
func TestEveryClientTakes409ForInProgress(t *testing.T) {
	t.Parallel()
	answers := map[string]func(w http.ResponseWriter){
		"with the error body": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"in_progress","message":"a call with this key is still being processed"}}`)
		},
		"bare": func(w http.ResponseWriter) { w.WriteHeader(http.StatusConflict) },
	}
	for _, c := range clients(t) {
		for shape, answer := range answers {
			t.Run(fmt.Sprintf("%s, 409 %s", c.name, shape), func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				var keys []string
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					keys = append(keys, r.Header.Get("Idempotency-Key"))
					mu.Unlock()
					_, _ = io.Copy(io.Discard, r.Body)
					answer(w)
				}))
				t.Cleanup(srv.Close)
				const key = "42-0123456789abcdef0123456789abcdef:step"
				for range 2 { // the first attempt, and the one after the backoff
					err := c.call(t.Context(), srv.URL, key)
					require.Error(t, err, "a 409 is no success")
					require.Equal(t, retryLater, c.verdict(err), "%v", err)
					require.True(t, c.inProgress(err), "the client says in progress: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				require.Equal(t, []string{key, key}, keys, "asked again under the same key")
			})
		}
	}
}
