package httpx

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

// Admission control: what a replica takes on is bounded, so that a flood (many clients, a
// slow dependency, clients that hang up) is refused at the door with a clear answer instead
// of piling up goroutines, connections and database work behind the requests that matter.

// Refusals counts the requests refused at the door, by why, and holds their answers.
type Refusals struct {
	InFlight atomic.Int64 // past a route's bound on requests served at once (503)
	Rate     atomic.Int64 // past a client's rate (429)
	// Hold is how long a refusal's answer waits before it is sent (0: none; the services
	// use RefusalHold), for at most MaxHeld refusals at a time (past that, answered at
	// once). A client that asks again as soon as it is answered, ignoring Retry-After (a
	// script's loop, a scraper), is slowed to one request per Hold per connection: without
	// the hold, 100 such clients sent a replica 5,000 requests a second, each costing it an
	// HTTP exchange, and the deposits beside them lost the CPU. A client that waits
	// Retry-After, longer than Hold, loses nothing.
	Hold time.Duration

	once sync.Once
	held chan struct{} // a slot per refusal whose answer is being held
}

// RefusalHold is the Hold of the services' refusals: half their Retry-After.
const RefusalHold = RetryAfter / 2

// MaxHeld bounds the refusals whose answers are held at once: each holds a goroutine and a
// connection, so past it a refusal is answered at once.
const MaxHeld = 1024

// hold waits r.Hold before c's refusal is answered, unless MaxHeld refusals wait already or
// the client hangs up.
func (r *Refusals) hold(c echo.Context) {
	if r == nil || r.Hold <= 0 {
		return
	}
	r.once.Do(func() { r.held = make(chan struct{}, MaxHeld) })
	select {
	case r.held <- struct{}{}:
	default:
		return
	}
	defer func() { <-r.held }()
	t := time.NewTimer(r.Hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.Request().Context().Done():
	}
}

// RetryAfter is the Retry-After a refused request is told to wait.
const RetryAfter = time.Second

// ErrRefused is the cause of every refusal at the door (429 past a client's rate, 503 past a
// bound in flight). They are counted (Refusals), and logged at debug only: a flood must not
// become a flood of log lines too.
var ErrRefused = errors.New("refused at the door")

// refusedKey marks a request refused at the door in its echo context: echo's rate limiter
// hands its refusal to the error handler itself, so the request logger never sees the error.
const refusedKey = "walletsaga.refused"

// refuse marks c refused, holds its answer (Refusals.Hold) and returns the refusal of code,
// saying msg.
func refuse(c echo.Context, r *Refusals, code apperr.Code, format string, args ...any) error {
	c.Set(refusedKey, true)
	r.hold(c)
	return apperr.Wrap(ErrRefused, code, format, args...)
}

// wasRefused reports whether c was refused at the door.
func wasRefused(c echo.Context) bool {
	refused, _ := c.Get(refusedKey).(bool)
	return refused
}

// InFlight bounds the requests the routes it wraps serve at once to max: one past it is
// answered 503 unavailable at once, with Retry-After, and counted in r.InFlight. A request
// admitted holds its slot until its handler returns (a money request, until its saga ran or
// was handed to the engine). max ≤ 0 bounds nothing.
func InFlight(max int, r *Refusals) echo.MiddlewareFunc {
	if max <= 0 {
		return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	slots := make(chan struct{}, max)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			select {
			case slots <- struct{}{}:
			default:
				r.InFlight.Add(1)
				c.Response().Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
				return refuse(c, r, apperr.Unavailable, "too many requests in flight on this replica (at most %d); retry after %s", max, RetryAfter)
			}
			defer func() { <-slots }()
			return next(c)
		}
	}
}

// PerClient limits each client to perSecond requests a second, in bursts of up to burst
// (echo's rate limiter over golang.org/x/time/rate, one token bucket per client, forgotten
// after three minutes idle): one past it is answered 429 too_many_requests, with
// Retry-After, and counted in r.Rate. A client is its bearer token (by its SHA-256: the token
// itself is never kept) when known says the token is valid, else its address (see ClientOf).
// perSecond ≤ 0 limits nothing.
func PerClient(perSecond float64, burst int, r *Refusals, known func(token string) bool) echo.MiddlewareFunc {
	if perSecond <= 0 {
		return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	store := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(perSecond), Burst: max(burst, 1), ExpiresIn: 3 * time.Minute,
	})
	return middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store:               store,
		IdentifierExtractor: func(c echo.Context) (string, error) { return ClientOf(c, known), nil },
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			r.Rate.Add(1)
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
			return refuse(c, r, apperr.TooManyRequests, "too many requests from this client (at most %g a second); retry after %s", perSecond, RetryAfter)
		},
		ErrorHandler: func(c echo.Context, _ error) error { return nil }, // never: the extractor does not fail
	})
}

// ProbeBurst is the burst of ProbeRate.
const ProbeBurst = 20

// ProbeRate is the rate of /healthz, /readyz and /metrics per client when the API's own is
// perSecond: at most 10 a second (0, unlimited, when the API is): a load balancer or a
// kubelet probes a replica about once a second, Prometheus scrapes it every 15 s, and each
// answer costs an HTTP exchange and, for /metrics, the gathering and encoding of every
// series (in the abuse bench's flood, scrapers held to the API's 100 a second took a core's
// worth of the services' CPU between them).
func ProbeRate(perSecond float64) float64 {
	if perSecond <= 0 {
		return 0
	}
	return min(perSecond, 10)
}

// ByCredential sends a request to special when is(its bearer token) holds, and any other
// request to others: two limits, e.g. one for a backend trusted to act for every user and one
// for each of its users.
func ByCredential(is func(token string) bool, special, others echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		s, o := special(next), others(next)
		return func(c echo.Context) error {
			if tok, ok := bearerOf(c); ok && is(tok) {
				return s(c)
			}
			return o(c)
		}
	}
}

// bearerOf returns the token of an "Authorization: Bearer <token>" header, if any.
func bearerOf(c echo.Context) (string, bool) {
	tok, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
	return tok, ok && tok != ""
}

// ClientOf names the client of a request for its rate: "token:<sha-256 of its bearer
// token>" when known says the token is valid, else "addr:<the connection's address>".
//
// Only a valid token is a client of its own: a request with a token made up for it counts
// against its address, or a client sending a new made-up token with each request would take a
// new bucket (and a new entry in the limiter's memory) with each. Never echo's RealIP: with
// no IP extractor set it believes the client's X-Forwarded-For, so a client could take a new
// address, and a new bucket, with every request (GO-2026-6872).
func ClientOf(c echo.Context, known func(token string) bool) string {
	if tok, ok := bearerOf(c); ok && known(tok) {
		sum := sha256.Sum256([]byte(tok))
		return "token:" + hex.EncodeToString(sum[:])
	}
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	return "addr:" + host
}

// HoldFailedAuth holds the answer to a request refused for its credential (401, 403) as a
// refusal at the door is held (Refusals.Hold), so that a client guessing tokens, or sending
// a forged one with each request from many addresses (each within its address's rate),
// gets one answer per Hold per connection instead of as many as the replica can write.
func HoldFailedAuth(r *Refusals) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if err != nil {
				if code := apperr.CodeOf(err); code == apperr.Unauthorized || code == apperr.Forbidden {
					r.hold(c)
				}
			}
			return err
		}
	}
}
