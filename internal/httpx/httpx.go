// Package httpx builds the echo servers of both binaries the same way: JSON errors through
// apperr's one code→status table, panic recovery, request ids, a body limit, a request
// timeout, access logs through slog (phone numbers in a request URI masked), and the
// /healthz and /readyz probes.
package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.opentelemetry.io/contrib/instrumentation/github.com/labstack/echo/otelecho"
	"golang.org/x/sync/singleflight"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/reqid"
)

// Options configures New.
type Options struct {
	Logger *slog.Logger
	// BodyLimit is the largest request body accepted, e.g. "64K" (default). echo counts in
	// powers of 1000 ("64K" is 64,000 bytes); "64KiB" would be 65,536.
	BodyLimit string
	// Timeout bounds one request's handler (default and most DefaultTimeout); long waits
	// must stay below it.
	Timeout time.Duration
}

// The servers' timeouts. A handler gets at most DefaultTimeout; the connection's write
// deadline leaves it room to answer after that (the timeout's own 503). A client that sends
// its request slowly (ReadTimeout), or keeps an idle connection (IdleTimeout), cannot hold a
// connection and its goroutine for longer.
const (
	DefaultTimeout    = 30 * time.Second
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 20 * time.Second
	WriteTimeout      = DefaultTimeout + 10*time.Second
	IdleTimeout       = 2 * time.Minute
)

// New returns an echo instance with the project's middleware and error handler.
func New(opts Options) *echo.Echo {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BodyLimit == "" {
		opts.BodyLimit = "64K"
	}
	if opts.Timeout == 0 || opts.Timeout > DefaultTimeout {
		opts.Timeout = DefaultTimeout
	}
	// Every line logged with a request's context carries its request id.
	log := slog.New(reqid.Handler(opts.Logger.Handler()))
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = ErrorHandler(log)
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		// A caller's id is kept (so one id follows a request across services) unless it is
		// too long or holds anything but printable ASCII; then a fresh one is made.
		RequestIDHandler: func(c echo.Context, id string) {
			if !validRequestID(id) {
				id = newRequestID()
				c.Response().Header().Set(echo.HeaderXRequestID, id)
			}
			c.SetRequest(c.Request().WithContext(reqid.With(c.Request().Context(), id)))
		},
	}))
	// No answer may be framed by another site's page (the consoles' pages set a whole policy
	// of their own, PageCSP), nor sniffed as another type than it says.
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XFrameOptions: "DENY", ContentTypeNosniff: "nosniff", ContentSecurityPolicy: "frame-ancestors 'none'",
	}))
	// Each request is a server span (a child of the caller's, given a traceparent header),
	// around everything below so that its log lines carry trace_id; the probes and the
	// metrics scrape are left out of the traces.
	e.Use(otelecho.Middleware("", otelecho.WithSkipper(func(c echo.Context) bool { return isProbe(c.Request().URL.Path) })))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.ErrorContext(c.Request().Context(), "panic in handler", "err", err, "path", c.Path(), "stack", string(stack))
			return err
		},
	}))
	e.Use(middleware.BodyLimit(opts.BodyLimit))
	e.Use(StrictQuery)
	e.Use(middleware.ContextTimeoutWithConfig(middleware.ContextTimeoutConfig{Timeout: opts.Timeout}))
	e.Use(middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogError: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			if isProbe(v.URI) || wasRefused(c) {
				level = slog.LevelDebug
			}
			attrs := []slog.Attr{
				// The console's search carries phone numbers in its query (?phone=…).
				slog.String("method", v.Method), slog.String("uri", redact.URI(v.URI)), slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency),
			}
			if v.Error != nil {
				attrs = append(attrs, slog.String("err", v.Error.Error()))
			}
			log.LogAttrs(c.Request().Context(), level, "http", attrs...)
			return nil
		},
	}))
	return e
}

// isProbe reports whether a request URI is a health probe or the metrics scrape.
func isProbe(uri string) bool {
	return strings.HasPrefix(uri, "/healthz") || strings.HasPrefix(uri, "/readyz") || strings.HasPrefix(uri, "/metrics")
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// validRequestID accepts 1–128 printable ASCII characters.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// ErrorHandler writes every error as {"error":{"code","message"}}: *apperr.Error with its
// own code, echo's HTTP errors (404 route, 405, 413 body limit, 415) mapped to codes, and
// anything else as a generic 500 whose details only reach the log.
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		var he *echo.HTTPError
		if errors.As(err, &he) {
			err = fromEchoError(he)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = apperr.Wrap(err, apperr.Unavailable, "request timed out")
		}
		status, body := apperr.ToBody(err)
		if status >= 500 && !errors.Is(err, ErrRefused) {
			log.ErrorContext(c.Request().Context(), "request failed", "err", err, "method", c.Request().Method, "path", c.Path())
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(status)
			return
		}
		_ = c.JSON(status, body)
	}
}

func fromEchoError(he *echo.HTTPError) error {
	msg := http.StatusText(he.Code)
	if m, ok := he.Message.(string); ok && m != "" {
		msg = m
	}
	var code apperr.Code
	switch he.Code {
	case http.StatusNotFound:
		code, msg = apperr.NotFound, "no such route"
	case http.StatusMethodNotAllowed:
		// echo's router has set Allow to the path's methods already.
		code, msg = apperr.MethodNotAllowed, "method not allowed: see the Allow header for the methods of this path"
	case http.StatusRequestEntityTooLarge:
		code, msg = apperr.TooLarge, "request body too large"
	case http.StatusUnsupportedMediaType:
		code, msg = apperr.Unsupported, "content type must be application/json"
	case http.StatusUnauthorized:
		code = apperr.Unauthorized
	case http.StatusForbidden:
		code = apperr.Forbidden
	case http.StatusServiceUnavailable:
		code = apperr.Unavailable
	default:
		if he.Code >= 400 && he.Code < 500 {
			code = apperr.Invalid
		} else {
			return apperr.Wrap(he, apperr.Internal, "internal error")
		}
	}
	e := apperr.New(code, "%s", msg)
	e.Err = he
	return e
}

// Check is a dependency check: nil when the dependency answers.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
	// Degraded, when set, makes the check informational: while it fails the process still
	// serves, without what Degraded names (e.g. "events are kept in the outbox until the
	// broker is back"), so it stays ready. Such a check must be cheap (a cached state): it is
	// also reported by /healthz.
	Degraded string
}

// Check states, as the probes answer them: what a dependency's error says (its address,
// its user, the database's name) is for the log, not for whoever reaches the port.
const (
	CheckOK   = "ok"
	CheckDown = "down"
)

// ProbeFresh is how old, at most, the checks' results a probe answers from are: probes within
// it of the last run of the checks share that run's results, however many there are.
const ProbeFresh = time.Second

// Probes registers GET /healthz (the process is up; informational checks' state is shown,
// never failing it) and GET /readyz (every check within 2s; 503 naming the failing checks
// when one without Degraded fails; 200 otherwise, listing what the process cannot do now).
// Both answer from a run of the checks at most ProbeFresh old, on a context of its own: one
// run at a time, however many probes arrive or hang up, so probes cannot take the database's
// connections from the requests. Each check is reported as CheckOK or CheckDown; why a check
// fails is logged to log, once each time its error changes, and its recovery likewise.
// limit, when not nil, admits each probe first (a client's rate: PerClient), so that a
// flood of probes is refused before it costs the process more than a 429.
func Probes(e *echo.Echo, log *slog.Logger, limit echo.MiddlewareFunc, checks ...Check) {
	if log == nil {
		log = slog.Default()
	}
	p := &probes{checks: checks, log: log, last: map[string]string{}}
	var mw []echo.MiddlewareFunc
	if limit != nil {
		mw = append(mw, limit)
	}
	e.GET("/healthz", func(c echo.Context) error {
		body := map[string]any{"status": "ok"}
		res, degraded, _ := p.recent(true)
		if len(res) > 0 {
			body["checks"] = res
		}
		if len(degraded) > 0 {
			body["degraded"] = degraded
		}
		return c.JSON(http.StatusOK, body)
	}, mw...)
	e.GET("/readyz", func(c echo.Context) error {
		res, degraded, ok := p.recent(false)
		body := map[string]any{"status": "ok", "checks": res}
		if len(degraded) > 0 {
			body["degraded"] = degraded
		}
		if !ok {
			body["status"] = "unavailable"
			return c.JSON(http.StatusServiceUnavailable, body)
		}
		return c.JSON(http.StatusOK, body)
	}, mw...)
}

// probes runs the checks and logs why one fails.
type probes struct {
	checks []Check
	log    *slog.Logger
	mu     sync.Mutex
	last   map[string]string // check name → the error last logged ("" once it passes)

	runs   singleflight.Group
	cached probeRun // guarded by mu
}

// probeRun is one run of every check.
type probeRun struct {
	at       time.Time
	res      map[string]string
	degraded []string
	ok       bool
}

// recent returns the results of a run of the checks at most ProbeFresh old, running them
// (once, for every caller waiting) when the last run is older; onlyInfo keeps the
// informational checks' results only. The run is bounded by 2s and is no caller's.
func (p *probes) recent(onlyInfo bool) (map[string]string, []string, bool) {
	p.mu.Lock()
	r := p.cached
	p.mu.Unlock()
	if r.at.IsZero() || time.Since(r.at) > ProbeFresh {
		v, _, _ := p.runs.Do("checks", func() (any, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			res, degraded, ok := p.run(ctx, false)
			r := probeRun{at: time.Now(), res: res, degraded: degraded, ok: ok}
			p.mu.Lock()
			p.cached = r
			p.mu.Unlock()
			return r, nil
		})
		r = v.(probeRun) //nolint:forcetypeassert // the function above returns a probeRun
	}
	if !onlyInfo {
		return r.res, r.degraded, r.ok
	}
	info := map[string]string{}
	for _, ch := range p.checks {
		if ch.Degraded != "" {
			info[ch.Name] = r.res[ch.Name]
		}
	}
	return info, r.degraded, true
}

// run runs the checks (only the informational ones when onlyInfo) and reports each one's
// state, what the process cannot do now, and whether every required check passed.
func (p *probes) run(ctx context.Context, onlyInfo bool) (res map[string]string, degraded []string, ok bool) {
	res, ok = map[string]string{}, true
	for _, ch := range p.checks {
		if onlyInfo && ch.Degraded == "" {
			continue
		}
		err := ch.Fn(ctx)
		p.note(ctx, ch.Name, err)
		switch {
		case err == nil:
			res[ch.Name] = CheckOK
		case ch.Degraded != "":
			res[ch.Name] = CheckDown
			degraded = append(degraded, ch.Name+": "+ch.Degraded)
		default:
			res[ch.Name] = CheckDown
			ok = false
		}
	}
	return res, degraded, ok
}

// note logs a check's error when it differs from the one last logged, and its recovery.
func (p *probes) note(ctx context.Context, name string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	p.mu.Lock()
	last, seen := p.last[name]
	p.last[name] = msg
	p.mu.Unlock()
	switch {
	case msg == last && (seen || msg == ""):
	case err != nil:
		p.log.WarnContext(ctx, "dependency check fails", "check", name, "err", err)
	default:
		p.log.InfoContext(ctx, "dependency check passes again", "check", name)
	}
}

// DecodeJSON strictly decodes the request body into v: content type application/json,
// no unknown fields, one value, clear messages naming what is wrong.
func DecodeJSON(c echo.Context, v any) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), echo.MIMEApplicationJSON) {
		return apperr.New(apperr.Unsupported, "content type must be application/json, got %q", ct)
	}
	return decodeStrict(c.Request().Body, v)
}

// Server serves a handler on an address between Start and Stop.
type Server struct {
	addr     string
	h        http.Handler
	log      *slog.Logger
	onListen func(net.Addr)

	srv     *http.Server
	ln      net.Listener
	ended   bool  // stopped before it started
	err     error // why Serve returned, unless Stop asked it to
	started chan struct{}
	stopped chan struct{}
}

// NewServer returns a server of h on addr; once it listens, it reports the address bound
// through onListen (tests use port 0).
func NewServer(addr string, h http.Handler, log *slog.Logger, onListen func(net.Addr)) *Server {
	return &Server{addr: addr, h: h, log: log, onListen: onListen, started: make(chan struct{}), stopped: make(chan struct{})}
}

// Start binds the address and serves in the background; it fails when the address cannot
// be bound.
func (s *Server) Start(ctx context.Context) error {
	if s.srv != nil || s.ended {
		return lifecycle.ErrStarted
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR %s: %w", s.addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout}
	go func() {
		defer close(s.stopped)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = fmt.Errorf("http server: %w", err)
		}
	}()
	close(s.started)
	if s.onListen != nil {
		s.onListen(ln.Addr())
	}
	return nil
}

// Started is closed once the server listens.
func (s *Server) Started() <-chan struct{} { return s.started }

// Stopped is closed once the server stopped serving: after Stop, or when it failed on its
// own (Stop then returns why).
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// Stop stops listening and waits for the requests in flight, until ctx ends. A server
// never started is stopped at once (and cannot start after).
func (s *Server) Stop(ctx context.Context) error {
	if s.srv == nil {
		if !s.ended {
			s.ended = true
			close(s.stopped)
		}
		return nil
	}
	err := s.srv.Shutdown(ctx)
	<-s.stopped
	s.log.Debug("http server stopped", "addr", s.ln.Addr().String())
	return errors.Join(s.err, err)
}
