package provider

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// Which answers are definite and which uncertain: the contract's table, as one pure function.
func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	body := func(code string) []byte { return []byte(`{"error":{"code":"` + code + `","message":"m"}}`) }
	html := []byte("<html>Bad Gateway</html>")
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		body       []byte
		ok         bool
		permanent  bool
		code       string
		after      time.Duration
	}{
		{"200", 200, "", []byte(`{}`), true, false, "", 0},
		{"402 declined", 402, "", body("declined"), false, true, "declined", 0},
		{"422 rejected", 422, "", body("rejected"), false, true, "rejected", 0},
		{"422 not cancellable", 422, "", body("not_cancellable"), false, true, "not_cancellable", 0},
		{"422 mismatch", 422, "", body("idempotency_mismatch"), false, true, "idempotency_mismatch", 0},
		{"400 invalid", 400, "", body("invalid_request"), false, true, "invalid_request", 0},
		{"401 unauthorized", 401, "", body("unauthorized"), false, true, "unauthorized", 0},
		{"404 with the error body", 404, "", body("not_found"), false, true, "not_found", 0},
		{"404 from a proxy", 404, "", html, false, false, CodeBadResponse, 0},
		{"402 without a code", 402, "", []byte(`{"error":{}}`), false, false, CodeBadResponse, 0},
		{"408", 408, "", nil, false, false, CodeTimeout, 0},
		{"409 in progress", 409, "", body("in_progress"), false, false, CodeInProgress, 0},
		{"425", 425, "", nil, false, false, CodeUnavailable, 0},
		{"429 with seconds", 429, "7", body("rate_limited"), false, false, CodeRateLimited, 7 * time.Second},
		{"429 with a date", 429, now.Add(90 * time.Second).Format(http.TimeFormat), nil, false, false, CodeRateLimited, 90 * time.Second},
		{"429 with a date gone by", 429, now.Add(-time.Minute).Format(http.TimeFormat), nil, false, false, CodeRateLimited, 0},
		{"429 asking too much", 429, "86400", nil, false, false, CodeRateLimited, MaxRetryAfter},
		{"429 with nonsense", 429, "soon", nil, false, false, CodeRateLimited, 0},
		{"429 with zero", 429, "0", nil, false, false, CodeRateLimited, 0},
		{"500 with the error body", 500, "", body("declined"), false, false, CodeUnavailable, 0},
		{"502 html", 502, "", html, false, false, CodeUnavailable, 0},
		{"503 with Retry-After", 503, "3", body("unavailable"), false, false, CodeUnavailable, 3 * time.Second},
		{"504 ignores Retry-After", 504, "3", nil, false, false, CodeUnavailable, 0},
		{"201", 201, "", []byte(`{"charge_id":"x"}`), false, false, CodeBadResponse, 0},
		{"204", 204, "", nil, false, false, CodeBadResponse, 0},
		{"302", 302, "", nil, false, false, CodeBadResponse, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			re := classify(tc.status, tc.retryAfter, tc.body, now)
			if tc.ok {
				require.Nil(t, re)
				return
			}
			require.NotNil(t, re)
			require.Equal(t, tc.permanent, re.Permanent, "%v", re)
			require.Equal(t, tc.code, re.Code)
			require.Equal(t, tc.after, re.RetryAfter)
		})
	}
}

// What a user reads of a step's failure is classified from the code this contract gives
// (wallet.PublicError): each code of a refusal the remote party made, or of an uncertain
// answer, has its own public class; the refusals that mean our request or our token is
// wrong are internal, for operators.
func TestEveryContractCodeHasItsPublicClass(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{
		CodeDeclined:            wallet.PublicDeclined,
		CodeRejected:            wallet.PublicRejected,
		CodeNotCancellable:      wallet.PublicNotCancellable,
		CodeIdempotencyMismatch: wallet.PublicInternal,
		CodeInvalidRequest:      wallet.PublicInternal,
		CodeUnauthorized:        wallet.PublicInternal,
		CodeUnavailable:         wallet.PublicProviderUnavailable,
		CodeTimeout:             wallet.PublicTimeout,
		CodeRateLimited:         wallet.PublicProviderUnavailable,
		CodeInProgress:          wallet.PublicProviderUnavailable,
		CodeBadResponse:         wallet.PublicProviderUnavailable,
	} {
		got := wallet.PublicError(&saga.ErrorInfo{Code: code, Message: "HTTP 503 from 10.0.0.7:8443"})
		require.Equal(t, want, got.Code, code)
		require.NotContains(t, got.Message, "10.0.0.7", code)
	}
}
