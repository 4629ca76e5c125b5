package smsprovider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

func post(t *testing.T, p *smsprovider.Provider, key string, user, seq int64) (int, string) {
	t.Helper()
	st, body, _ := postH(t, p, key, user, seq)
	return st, body
}

// postH posts an SMS and returns the answer's headers too.
func postH(t *testing.T, p *smsprovider.Provider, key string, user, seq int64) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL(), strings.NewReader(fmt.Sprintf(`{"user_id":%d,"seq":%d,"phone":"+1","text":"hi","late":false,"locale":"en","template":"deposit","params":{"amount":"1.00","currency":"CNY","balance_after":"1.00"}}`, user, seq)))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func TestItDeliversEachKeyOnce(t *testing.T) {
	t.Parallel()
	p := smsprovider.Start()
	defer p.Close()
	st, first, h := postH(t, p, "d:1:1", 1, 1)
	require.Equal(t, http.StatusOK, st)
	require.JSONEq(t, `{"message_id":"msg-1"}`, first)
	require.Empty(t, h.Get(smsprovider.HeaderReplayed))
	st, again, h := postH(t, p, "d:1:1", 1, 1)
	require.Equal(t, http.StatusOK, st, "a key it delivered before: its first answer again, never 409")
	require.Equal(t, first, again)
	require.Equal(t, "true", h.Get(smsprovider.HeaderReplayed))
	st, _ = post(t, p, "d:1:2", 1, 2)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, map[int64][]int64{1: {1, 2}}, p.Delivered())
	require.Equal(t, 1, p.Repeats())
	require.Len(t, p.Calls(func(c smsprovider.Call) bool { return c.Replayed }), 1)
	require.Zero(t, p.OutOfOrder())
	require.False(t, p.DeliveredAt(1, 2).IsZero())
	require.Len(t, p.Calls(nil), 3)
	require.Equal(t, 2, p.DeliveredBetween(time.Now().Add(-time.Minute), time.Now().Add(time.Minute)))
}

func TestItFailsHangsAndGarblesOnDemand(t *testing.T) {
	t.Parallel()
	p := smsprovider.Start()
	defer p.Close()
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		switch c.UserID {
		case 1:
			return smsprovider.Fault{Status: http.StatusServiceUnavailable, Body: "\xff broken"}
		case 2:
			return smsprovider.Fault{Hang: 50 * time.Millisecond}
		case 3:
			return smsprovider.Fault{LoseAnswer: true}
		}
		return smsprovider.Fault{}
	})
	st, body := post(t, p, "d:1:1", 1, 1)
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Equal(t, "\xff broken", body)
	start := time.Now()
	st, _ = post(t, p, "d:2:1", 2, 1)
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	st, _ = post(t, p, "d:3:1", 3, 1)
	require.Equal(t, http.StatusInternalServerError, st, "delivered, the answer lost")
	require.Equal(t, map[int64][]int64{3: {1}}, p.Delivered())

	p.SetOutage(true)
	st, _ = post(t, p, "d:4:1", 4, 1)
	require.Equal(t, http.StatusServiceUnavailable, st)
	p.SetOutage(false)
	p.OnDeliver(func(context.Context, smsprovider.Call) error { return errors.New("its table is away") })
	st, _ = post(t, p, "d:4:1", 4, 1)
	require.Equal(t, http.StatusServiceUnavailable, st, "not delivered when OnDeliver fails")
	p.OnDeliver(nil)
	st, _ = post(t, p, "d:4:1", 4, 1)
	require.Equal(t, http.StatusOK, st)
}

// 409 means one thing: a call under the same key is still being delivered. The call that
// holds the key delivers it; asked again afterwards, the provider gives its first answer.
func TestItAnswers409ToAKeyStillInProgress(t *testing.T) {
	t.Parallel()
	p := smsprovider.Start()
	defer p.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	p.OnDeliver(func(context.Context, smsprovider.Call) error {
		close(entered)
		<-release
		return nil
	})
	done := make(chan int)
	go func() {
		st, _ := post(t, p, "d:1:1", 1, 1)
		done <- st
	}()
	<-entered
	st, body := post(t, p, "d:1:1", 1, 1)
	require.Equal(t, http.StatusConflict, st, "the first call of the key is still delivering it")
	require.JSONEq(t, smsprovider.InProgressBody, body)
	require.Empty(t, p.Delivered(), "a 409 is not a delivery")
	close(release)
	require.Equal(t, http.StatusOK, <-done)
	st, _, h := postH(t, p, "d:1:1", 1, 1)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "true", h.Get(smsprovider.HeaderReplayed))
	require.Equal(t, map[int64][]int64{1: {1}}, p.Delivered())
}

// TestItRefusesABodyOffTheContract: a body with a field the contract does not have, or
// without the template, is refused 400, never delivered.
func TestItRefusesABodyOffTheContract(t *testing.T) {
	t.Parallel()
	p := smsprovider.Start()
	defer p.Close()
	for name, body := range map[string]string{
		"unknown field": `{"user_id":1,"seq":1,"phone":"+1","text":"hi","late":false,"locale":"en","template":"deposit","params":{},"extra":1}`,
		"no template":   `{"user_id":1,"seq":1,"phone":"+1","text":"hi","late":false}`,
	} {
		req, err := http.NewRequest(http.MethodPost, p.URL(), strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "d:1:1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
	}
	require.Empty(t, p.Delivered())
}

// TestAFaultMayAskForAWait: a fault's RetryAfter is the answer's Retry-After header.
func TestAFaultMayAskForAWait(t *testing.T) {
	t.Parallel()
	p := smsprovider.Start()
	defer p.Close()
	p.SetFault(func(smsprovider.Call) smsprovider.Fault {
		return smsprovider.Fault{Status: http.StatusTooManyRequests, RetryAfter: "2"}
	})
	st, _, h := postH(t, p, "d:1:1", 1, 1)
	require.Equal(t, http.StatusTooManyRequests, st)
	require.Equal(t, "2", h.Get("Retry-After"))
}
