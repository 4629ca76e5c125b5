package telemetry

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/walletsaga/walletsaga/internal/redact"
)

// HTTPTransport returns the transport of the binaries' HTTP clients (the providers, the SMS
// webhook): base (http.DefaultTransport when nil), with each request a client span that
// carries its traceparent to the server. The span shows the request's URL as redact.URL
// does: otelhttp puts the URL, query and all, in url.full, and spans go to whatever collector
// OTEL_* names, which is no place for a provider's key. So the instrumentation is handed the
// request with its URL redacted, and the request goes out with its URL as it came: whatever
// otelhttp reads of the URL, now or in a later version, it reads redacted.
func HTTPTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return shownURL{next: otelhttp.NewTransport(sentURL{next: base})}
}

// sentURLKey keys the URL a request goes out with, in the context of the request the
// instrumentation is handed.
type sentURLKey struct{}

// shownURL hands next (the instrumentation) the request with its URL redacted, and the URL
// to send in its context, for sentURL.
type shownURL struct{ next http.RoundTripper }

func (t shownURL) RoundTrip(r *http.Request) (*http.Response, error) {
	raw := r.URL.String()
	shown := redact.URL(raw)
	if shown == raw {
		return t.next.RoundTrip(r)
	}
	u, err := url.Parse(shown)
	if err != nil {
		u = &url.URL{Scheme: r.URL.Scheme, Host: r.URL.Host} // never the URL as it came
	}
	redacted := r.WithContext(context.WithValue(r.Context(), sentURLKey{}, r.URL))
	redacted.URL = u
	return t.next.RoundTrip(redacted)
}

// sentURL sends the request the instrumentation passes on with the URL shownURL kept.
type sentURL struct{ next http.RoundTripper }

func (t sentURL) RoundTrip(r *http.Request) (*http.Response, error) {
	if u, ok := r.Context().Value(sentURLKey{}).(*url.URL); ok {
		r = r.WithContext(r.Context())
		r.URL = u
	}
	return t.next.RoundTrip(r)
}
