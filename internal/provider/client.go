package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/telemetry"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// Defaults of Options.
const (
	DefaultTimeout = 10 * time.Second
	// MaxRetryAfter caps the wait a Retry-After header can ask for: a provider asking for
	// longer gets this much, and the saga's retry window still bounds the whole.
	MaxRetryAfter = 5 * time.Minute
	// maxBody bounds what is read of an answer: the documented ones are a few hundred bytes.
	maxBody = 64 << 10
	// idleConns is how many idle connections are kept per provider, so that concurrent
	// sagas reuse connections instead of opening one per call; it is also the most open at
	// once (MaxConnsPerHost): past it a call waits for a connection, within its timeout,
	// rather than opening file descriptors without bound against a slow provider.
	idleConns = 128
)

// Options configure an adapter.
type Options struct {
	// URL is the provider's base URL (http://host:port); the contract's paths are appended.
	URL string
	// Token is the bearer token sent with every call.
	Token string
	// Timeout bounds one call, from sending the request to reading the whole answer
	// (default DefaultTimeout). A call that reaches it is retryable (CodeTimeout).
	Timeout time.Duration
	// Transport carries the requests (default: a clone of http.DefaultTransport keeping
	// idleConns idle connections per host, and at most that many open).
	Transport http.RoundTripper
}

// client is what both adapters share: one HTTP client, the base URL, the token.
type client struct {
	base    *url.URL
	token   string
	timeout time.Duration
	http    *http.Client
}

func newClient(o Options) (*client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provider: URL %q is not an http(s) URL with a host", redact.URL(o.URL))
	}
	if o.Token == "" {
		return nil, errors.New("provider: empty token")
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("provider: negative timeout %s", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	rt := o.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone() //nolint:forcetypeassert // the standard library's default is an *http.Transport
		t.MaxIdleConns, t.MaxIdleConnsPerHost, t.MaxConnsPerHost = idleConns, idleConns, idleConns
		rt = t
	}
	return &client{
		base: u, token: o.Token, timeout: o.Timeout,
		http: &http.Client{
			// Each call is a client span, and carries its traceparent to the provider.
			Transport: telemetry.HTTPTransport(rt),
			// A redirect is not part of the contract: it is answered as it came (a 3xx,
			// which classify takes for an answer it does not know).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// post sends body to path with key and decodes a 200 answer into out. Any other outcome is
// a *wallet.RemoteError (see classify).
func (c *client) post(ctx context.Context, path, key string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return wallet.PermanentError(CodeInvalidRequest, fmt.Errorf("provider: encode %s: %w", path, err))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(path).String(), bytes.NewReader(b))
	if err != nil {
		return wallet.PermanentError(CodeInvalidRequest, fmt.Errorf("provider: %s: %w", path, err))
	}
	// Without GetBody the transport never replays the request by itself (it would, once,
	// on a reused connection that broke, for a request with an Idempotency-Key): every
	// attempt is the saga engine's, counted and recorded.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(HeaderIdempotencyKey, key)
	resp, err := c.http.Do(req)
	if err != nil {
		return transportError(path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return transportError(path, err)
	}
	if len(data) > maxBody {
		return wallet.RetryableError(CodeBadResponse, fmt.Errorf("provider: %s: answer %d longer than %d bytes", path, resp.StatusCode, maxBody))
	}
	if rerr := classify(resp.StatusCode, resp.Header.Get("Retry-After"), data, time.Now()); rerr != nil {
		rerr.Err = fmt.Errorf("provider: %s: %w", path, rerr.Err)
		return rerr
	}
	if err := json.Unmarshal(data, out); err != nil {
		return wallet.RetryableError(CodeBadResponse, fmt.Errorf("provider: %s: 200 whose body is not the documented JSON: %w", path, err))
	}
	return nil
}

// transportError classifies a call that got no (whole) answer: a timeout or a connection
// error. Either way the call may have taken effect: retryable. The error names the URL
// called as redact.URL shows it (no userinfo, keys masked): it is stored in the saga's
// history and logged.
func transportError(path string, err error) error {
	err = redact.URLError(err)
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return wallet.RetryableError(CodeTimeout, fmt.Errorf("provider: %s: no answer in time: %w", path, err))
	}
	return wallet.RetryableError(CodeUnavailable, fmt.Errorf("provider: %s: no answer: %w", path, err))
}

// classify turns an answer into nil (a 200, whose body the caller decodes) or a
// *wallet.RemoteError:
//
//   - 400, 401, 402, 403, 404, 422 and any other 4xx not named below, with the documented
//     error body: permanent, with the body's code (the provider said no, for good);
//   - 408, 409, 425, 429, every 5xx: retryable; 429 and 503 carry Retry-After as the
//     minimum wait before the next attempt (capped at MaxRetryAfter);
//   - anything else (a 4xx without the documented body, which a proxy may have written, a
//     1xx, 2xx other than 200, 3xx): retryable, CodeBadResponse.
func classify(status int, retryAfter string, body []byte, now time.Time) *wallet.RemoteError {
	if status == http.StatusOK {
		return nil
	}
	detail, documented := errorDetail(body)
	msg := fmt.Sprintf("HTTP %d", status)
	if documented {
		msg += ": " + detail.Code + ": " + detail.Message
	}
	switch {
	case status == http.StatusRequestTimeout:
		return retryable(CodeTimeout, msg, 0)
	case status == http.StatusConflict:
		return retryable(CodeInProgress, msg, 0)
	case status == http.StatusTooEarly:
		return retryable(CodeUnavailable, msg, 0)
	case status == http.StatusTooManyRequests:
		return retryable(CodeRateLimited, msg, parseRetryAfter(retryAfter, now))
	case status == http.StatusServiceUnavailable:
		return retryable(CodeUnavailable, msg, parseRetryAfter(retryAfter, now))
	case status >= 500 && status <= 599:
		return retryable(CodeUnavailable, msg, 0)
	case status >= 400 && status <= 499 && documented:
		return &wallet.RemoteError{Code: detail.Code, Permanent: true, Err: errors.New(msg)}
	}
	return retryable(CodeBadResponse, msg+" (not an answer of the contract)", 0)
}

func retryable(code, msg string, after time.Duration) *wallet.RemoteError {
	return &wallet.RemoteError{Code: code, Err: errors.New(msg), RetryAfter: after}
}

// errorDetail decodes the documented error body; ok is false unless it has a code.
func errorDetail(body []byte) (ErrorDetail, bool) {
	var b ErrorBody
	if err := json.Unmarshal(body, &b); err != nil || b.Error.Code == "" {
		return ErrorDetail{}, false
	}
	return b.Error, true
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date. Unreadable, absent
// or in the past is 0 (the engine's own backoff); beyond MaxRetryAfter is MaxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	return backoff.RetryAfter(v, now, MaxRetryAfter)
}
