// Package senders delivers SMS to a provider: the log sender (the SMS log row is the
// delivery), the webhook sender (the provider contract over HTTP), the failure switches of
// demos and tests, a sender that times its sends for metrics, and the provider breaker that
// holds sends back while the provider as a whole is failing.
package senders

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// LogSender is the built-in provider: an SMS is delivered when its row is in notify.sms_log.
// It is journaled: the lane writes that row in the transaction that records the SMS sent (an
// operator replay, in the transaction of its audit row), so each SMS exists exactly once, or
// not at all if that transaction rolls back. Send itself only writes one line to Out, with
// the phone masked.
type LogSender struct {
	Out io.Writer
	mu  sync.Mutex // one line at a time on Out
}

// NewLogSender returns a LogSender writing its lines to out (io.Discard when nil).
func NewLogSender(out io.Writer) *LogSender {
	if out == nil {
		out = io.Discard
	}
	return &LogSender{Out: out}
}

// Journaled reports that the SMS log row is this sender's delivery.
func (*LogSender) Journaled() bool { return true }

// Send writes m's line; it never fails.
func (s *LogSender) Send(_ context.Context, m notify.SMS) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.Out
	if out == nil {
		out = io.Discard
	}
	// The line is written before the record commits: if that fails, the table is the truth
	// and the retry writes the line again.
	_, _ = fmt.Fprintf(out, "SMS user=%d seq=%d to=%s late=%t text=%q\n", m.UserID, m.Seq, redact.Phone(m.Phone), m.Late, m.Text)
	return nil
}

// DefaultWebhookTimeout bounds one webhook request when WebhookSender.Timeout is zero.
const DefaultWebhookTimeout = 5 * time.Second

// HeaderReplayed marks a provider's answer to a key it finished before: its first answer,
// given again (the IETF httpapi Idempotency-Key draft's convention, which the wallet API
// follows too). Its value is "true".
const HeaderReplayed = "Idempotent-Replayed"

// WebhookSender POSTs each SMS as JSON {user_id, seq, phone, text, late, locale, template,
// params} to URL with the header Idempotency-Key set to the SMS's key (its ProviderKey, kept
// by an operator's replay, which sets late), and Authorization: Bearer Token when Token is
// set. text is the SMS rendered, for a provider that sends text; template and params
// (notify.SMS.Template) are the same SMS for a provider that sends only templates approved
// beforehand, in the language locale names. The provider
// must deduplicate on that key, and 409 means one thing, as in every provider contract of
// walletsaga: "a send under this key is known and not finished: ask again later". A key it
// finished is answered with its first answer (a 2xx) again, marked Idempotent-Replayed: true.
//
// So a 2xx is success, and with Idempotent-Replayed: true it is notify.ErrAlreadyDelivered
// (delivered before: recorded sent, nothing sent twice); 409 is notify.ErrInProgress (never
// delivered as far as anyone knows: retried under the same key, which the provider delivers
// once); 5xx, 408, 429, timeouts, connection errors, 401 and 403, and every redirect wrap
// notify.ErrProviderUnavailable (retried, and counted by the provider breaker: a refused token
// or a redirect is the provider refusing every SMS until an operator fixes the credentials
// or the URL, which must delay SMS, never dead-letter them); any other 4xx wraps
// notify.ErrPermanent. A 409, 429 or 503 with a Retry-After header (seconds, or an HTTP
// date) asks for that wait before the SMS's next attempt (notify.RetryLater), read up to
// MaxRetryAfter; the retry policy bounds it again by its longest backoff.
//
// A redirect is never followed, whatever Client says: the token, the phone number and the
// text go to URL and nowhere else (a redirect may name another host, or plain http).
type WebhookSender struct {
	URL     string
	Token   string        // the provider's bearer token; none when empty
	Timeout time.Duration // per request; DefaultWebhookTimeout when zero
	Client  *http.Client  // http.DefaultClient when nil; its CheckRedirect is not used
}

// NewWebhookClient returns an HTTP client for a WebhookSender that up to conns lanes use at
// once: it keeps that many idle connections to the provider, and opens no more. http.DefaultClient keeps two per
// host, so with 64 lanes sending, nearly every SMS paid for a new connection (and left one in
// TIME_WAIT).
func NewWebhookClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = max(conns, t.MaxIdleConns)
	t.MaxIdleConnsPerHost = max(conns, 1)
	// And no more open than that: past it a send waits for a connection (within SMS_TIMEOUT)
	// rather than opening file descriptors without bound against a slow provider.
	t.MaxConnsPerHost = max(conns, 1)
	return &http.Client{
		// Each SMS request is a client span, and carries its traceparent to the provider.
		Transport: telemetry.HTTPTransport(t),
		// A redirect is answered as it came, never followed (WebhookSender refuses it).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// NewWebhookSender checks rawURL (absolute http or https) and returns a sender for it.
func NewWebhookSender(rawURL string, timeout time.Duration, client *http.Client) (*WebhookSender, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apperr.New(apperr.Invalid, "webhook URL must be an absolute http(s) URL, got %q", redact.URL(rawURL))
	}
	if timeout < 0 {
		return nil, apperr.New(apperr.Invalid, "webhook timeout must not be negative, got %s", timeout)
	}
	return &WebhookSender{URL: rawURL, Timeout: timeout, Client: client}, nil
}

// MaxRetryAfter is the longest wait a provider's Retry-After is read as: a longer one, or one
// that is no number a Duration holds, is this much (the retry policy then bounds it by its
// own longest backoff, SMS_RETRY_MAX).
const MaxRetryAfter = time.Hour

type webhookBody struct {
	UserID   int64                 `json:"user_id"`
	Seq      int64                 `json:"seq"`
	Phone    string                `json:"phone"`
	Text     string                `json:"text"`
	Late     bool                  `json:"late"`
	Locale   string                `json:"locale"`
	Template string                `json:"template"`
	Params   notify.TemplateParams `json:"params"`
}

// Send posts m.
func (s *WebhookSender) Send(ctx context.Context, m notify.SMS) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultWebhookTimeout
	}
	client := http.Client{}
	if s.Client != nil {
		client = *s.Client
	}
	// Answer a redirect as it came: Send refuses it below.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	key := m.IdempotencyKey
	if key == "" {
		// A key the provider could confuse with another deployment's is worse than no send.
		return fmt.Errorf("webhook: SMS %d:%d has no idempotency key", m.UserID, m.Seq)
	}
	template, params := m.Template()
	body, err := json.Marshal(webhookBody{UserID: m.UserID, Seq: m.Seq, Phone: m.Phone, Text: m.Text, Late: m.Late,
		Locale: m.Locale, Template: template, Params: params})
	if err != nil {
		return fmt.Errorf("webhook: encode SMS %s: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: SMS %s: %w: %w", key, err, notify.ErrPermanent)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: SMS %s: %w: %w", key, redact.URLError(err), notify.ErrProviderUnavailable)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if strings.EqualFold(strings.TrimSpace(resp.Header.Get(HeaderReplayed)), "true") {
			return fmt.Errorf("webhook: SMS %s: provider answered %s, %s: it had the SMS under this key: %w",
				key, freetext.Clip(resp.Status, 100), HeaderReplayed, notify.ErrAlreadyDelivered)
		}
		return nil
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Its body is left out: it may spell the address it names, query and all.
		return fmt.Errorf("webhook: SMS %s: provider answered %s: a redirect (to %q) is refused, so that the token and the SMS go to the configured URL only: fix SMS_WEBHOOK_URL: %w",
			key, freetext.Clip(resp.Status, 100), redact.URL(resp.Header.Get("Location")), notify.ErrProviderUnavailable)
	}
	// The reply becomes the SMS's failure reason: whatever its bytes (cut inside a
	// character, a NUL), it must be text Postgres takes.
	msg := fmt.Sprintf("webhook: SMS %s: provider answered %s: %s", key, freetext.Clip(resp.Status, 100),
		freetext.Clip(strings.TrimSpace(string(snippet)), 300))
	// The wait a 409 ("ask again later"), 429 or 503 asks for, the payment adapters' way
	// (internal/provider): 0 when none, unreadable or gone by.
	var later time.Duration
	switch resp.StatusCode {
	case http.StatusConflict, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		later = backoff.RetryAfter(resp.Header.Get("Retry-After"), time.Now(), MaxRetryAfter)
		if later > 0 {
			msg += fmt.Sprintf(" (retry after %s)", later)
		}
	}
	switch {
	case resp.StatusCode == http.StatusConflict:
		// In progress, never delivered: a send under this key is not finished.
		return notify.RetryLater(fmt.Errorf("%s: %w", msg, notify.ErrInProgress), later)
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500,
		resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		return notify.RetryLater(fmt.Errorf("%s: %w", msg, notify.ErrProviderUnavailable), later)
	case resp.StatusCode >= 400:
		return fmt.Errorf("%s: %w", msg, notify.ErrPermanent)
	default: // 1xx: not an answer we understand; try again
		return errors.New(msg)
	}
}

// The failure switches the demo and the tests configure: SMS to numbers ending in 0000 and
// SMS for events of 4.04 (404 minor units, either sign) always fail. They are never on by
// default: a notifier fails no SMS on purpose unless it is configured to
// (SMS_FAIL_PHONE_PATTERN, SMS_FAIL_AMOUNT).
const (
	DemoFailPhonePattern = `0000$`
	DemoFailAmount       = 404
)

// FailureSwitch makes chosen SMS fail every time, for demos and tests: those whose phone
// matches PhonePattern (nil disables) and those whose event amount, taken absolute, equals
// FailAmount (0 disables). The failure is retryable, so the gate retries it and finally
// dead-letters it. Every other SMS goes to Inner.
type FailureSwitch struct {
	Inner        notify.Sender
	PhonePattern *regexp.Regexp
	FailAmount   int64
}

// NewFailureSwitch wraps inner with the demo's switches (phone 0000$, amount 404).
func NewFailureSwitch(inner notify.Sender) *FailureSwitch {
	return &FailureSwitch{Inner: inner, PhonePattern: regexp.MustCompile(DemoFailPhonePattern), FailAmount: DemoFailAmount}
}

// Journaled reports whether Inner is journaled.
func (f *FailureSwitch) Journaled() bool { return notify.IsJournaled(f.Inner) }

// Send fails m if a switch matches it and otherwise hands it to Inner.
func (f *FailureSwitch) Send(ctx context.Context, m notify.SMS) error {
	if f.PhonePattern != nil && f.PhonePattern.MatchString(m.Phone) {
		return fmt.Errorf("simulated failure: phone %s matches %q", redact.Phone(m.Phone), f.PhonePattern.String())
	}
	if f.FailAmount != 0 && (m.Amount == f.FailAmount || m.Amount == -f.FailAmount) {
		return fmt.Errorf("simulated failure: amount %d matches the failing amount %d", m.Amount, f.FailAmount)
	}
	if f.Inner == nil {
		return errors.New("failure switch: no sender behind it")
	}
	return f.Inner.Send(ctx, m)
}

// ParsePhonePattern parses the phone failure switch from configuration: a regular expression
// matched against the E.164 number, or "" / "off" / "none" to disable it (nil, nil).
func ParsePhonePattern(s string) (*regexp.Regexp, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "off", "none":
		return nil, nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, apperr.Wrap(err, apperr.Invalid, "phone failure pattern %q is not a valid regular expression: %v", s, err)
	}
	return re, nil
}

// Settings choose the notifier's sender: Kind webhook POSTs to WebhookURL (presenting
// WebhookToken), anything else is the log sender writing to Out; a failure switch set
// (FailPhone, FailAmount) wraps either.
type Settings struct {
	Kind         string // log | webhook
	WebhookURL   string
	WebhookToken string
	Timeout      time.Duration // of one webhook call
	Conns        int           // the webhook client's connections per host
	FailPhone    *regexp.Regexp
	FailAmount   int64
	Out          io.Writer // the log sender's lines
}

// New returns the sender s chooses; its errors are NewWebhookSender's.
func New(s Settings) (notify.Sender, error) {
	var sender notify.Sender
	switch s.Kind {
	case "webhook":
		w, err := NewWebhookSender(s.WebhookURL, s.Timeout, NewWebhookClient(s.Conns))
		if err != nil {
			return nil, err
		}
		// On the request, never on the transport: a transport would present it to any
		// address the request is sent on to.
		w.Token = s.WebhookToken
		sender = w
	default:
		sender = NewLogSender(s.Out)
	}
	if s.FailPhone == nil && s.FailAmount == 0 {
		return sender, nil
	}
	return &FailureSwitch{Inner: sender, PhonePattern: s.FailPhone, FailAmount: s.FailAmount}, nil
}
