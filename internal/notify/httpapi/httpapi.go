// Package httpapi is the notifier's HTTP side on echo: the SMS log read API, the delivery
// state (GET /v1/gate: lanes, breaker, gaps, baselines), the operator API (replay a dead
// letter, skip a lost seq) and the live page. Errors
// go out as {"error":{"code","message"}} through apperr's one code→status table (see httpx).
//
// Authentication: the read routes (the SMS log, the feed, dead letters, bad messages and
// one bad message whole, the audit trail, the gate) need the read token or an operator's
// token (Authorization: Bearer); the page and its assets are open, hold no data, and ask for
// the token. With neither configured the read routes answer 403: the SMS log is never open
// by default. The operator routes need an operator's own token, which names who acts (see
// httpx.Operator).
package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/singleflight"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/notify/web"
)

// OpenAPI is the OpenAPI 3 description of every route the notifier serves, served at
// /openapi.yaml. cmd/notifier's test checks it against the routes actually registered.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Deps is what the notifier's HTTP API needs.
type Deps struct {
	// Log reads the SMS log, the lists and the audit trail.
	Log *smslog.Store
	// Operator replays dead letters and skips lost seqs.
	Operator *deadletters.Operator
	// Gate serves GET /v1/gate and the skip action; nil leaves both out.
	Gate *Gate
	// Operators may call the operator endpoints, each with their own bearer token, which
	// names the actor of the audit rows. None disables them: every request is refused with
	// 403. The read endpoints take their tokens too.
	Operators httpx.Operators
	// ReadToken guards the read endpoints, which also take the operators' tokens. With
	// neither they answer 403.
	ReadToken string
	Logger    *slog.Logger // slog.Default() when nil
	// RatePerSecond and RateBurst limit each client of the read routes (its valid bearer
	// token, else its address) to so many requests a second: one past it is 429 with Retry-After
	// (0: unlimited). Refusals counts those refused (nil: counted nowhere).
	RatePerSecond float64
	RateBurst     int
	Refusals      *httpx.Refusals
	// MaxReadsInFlight bounds the read routes' requests served at once: one past it is 503
	// with Retry-After, counted in Refusals (0: unbounded).
	MaxReadsInFlight int
}

// Gate is the notifier's delivery as GET /v1/gate shows it.
type Gate struct {
	Store *gate.Store
	Lanes *gate.Lanes
	Inbox *inbox.Inbox
	// DLQBacklog counts the dead letters not yet in the DLQ topic
	// (deadletters.Publisher.Backlog).
	DLQBacklog func(context.Context) (int64, error)
	// GapAlertAfter is how old a gap is before it is listed as an alert.
	GapAlertAfter time.Duration
	// Fresh is how old, at most, the counts GET /v1/gate answers with are (0: ViewFresh).
	Fresh time.Duration

	cache viewCache
}

// ViewFresh is how old, at most, the gate's counts are that GET /v1/gate answers with: they
// count whole tables (the inbox's pending rows, the users due), so requests within it of the
// last reading share it, and concurrent ones share one reading, however many there are or
// hang up. Without it each request counted anew: 15 console reads in the abuse bench's
// flood took 2.6 s of the database's CPU each.
const ViewFresh = 2 * time.Second

// viewCache holds the last reading of the gate's counts.
type viewCache struct {
	mu   sync.Mutex
	at   time.Time
	last viewReading
	runs singleflight.Group
}

// viewReading is one reading of what GET /v1/gate shows from the database.
type viewReading struct {
	view    gate.View
	backlog int64
}

// forget drops the last reading, so that the next request reads anew (after an operator's
// action here, which the operator looks for next).
func (g *Gate) forget() {
	if g == nil {
		return
	}
	g.cache.mu.Lock()
	g.cache.at = time.Time{}
	g.cache.mu.Unlock()
}

// read returns a reading at most g.Fresh old: the last one, or a new one on a context of its
// own (a request that hangs up does not cancel the reading others wait for).
func (g *Gate) read(ctx context.Context) (viewReading, error) {
	fresh := g.Fresh
	if fresh <= 0 {
		fresh = ViewFresh
	}
	g.cache.mu.Lock()
	if !g.cache.at.IsZero() && time.Since(g.cache.at) < fresh {
		r := g.cache.last
		g.cache.mu.Unlock()
		return r, nil
	}
	g.cache.mu.Unlock()
	r, err, _ := g.cache.runs.Do("view", func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		view, err := g.Store.View(rctx, 100, g.GapAlertAfter)
		if err != nil {
			return nil, err
		}
		backlog, err := g.DLQBacklog(rctx)
		if err != nil {
			return nil, err
		}
		r := viewReading{view: view, backlog: backlog}
		g.cache.mu.Lock()
		g.cache.at, g.cache.last = time.Now(), r
		g.cache.mu.Unlock()
		return r, nil
	})
	if err != nil {
		return viewReading{}, err
	}
	return r.(viewReading), nil
}

// Register adds every route of the notifier's API and page to e. This is the one list.
func Register(e *echo.Echo, d Deps) {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Refusals == nil {
		d.Refusals = &httpx.Refusals{}
	}
	// Every read route within its client's rate, then the read token or an operator's, then
	// within the replica's bound on reads in flight: a request that is not the reader's or an
	// operator's takes no slot.
	valid := func(token string) bool {
		isReader := httpx.TokenIs(token, d.ReadToken)
		_, isOperator := d.Operators.Identify(token)
		return isReader || isOperator
	}
	read := []echo.MiddlewareFunc{httpx.PerClient(d.RatePerSecond, d.RateBurst, d.Refusals, valid),
		httpx.RequireBearerOrOperator("read", "the SMS log API is disabled: the notifier has no READ_TOKEN (nor OPERATOR_TOKENS) configured",
			d.ReadToken, d.Operators),
		httpx.InFlight(d.MaxReadsInFlight, d.Refusals)}
	type route struct {
		method, path string
		handler      echo.HandlerFunc
		mw           []echo.MiddlewareFunc
	}
	page, asset := httpx.Page(web.FS)
	routes := []route{
		{http.MethodGet, "/", page, nil},
		{http.MethodGet, "/assets/:name", asset, nil},
		{http.MethodGet, "/v1/users", listUsers(d.Log), read},
		{http.MethodGet, "/v1/users/:id/sms", listUserSMS(d.Log), read},
		{http.MethodGet, "/v1/sms", noStore(listPage(d.Log.Changes)), read},
		{http.MethodGet, "/v1/activity", noStore(listPage(d.Log.Activity)), read},
		{http.MethodGet, "/v1/dead-letters", listPage(d.Log.DeadLetters), read},
		{http.MethodGet, "/v1/bad-messages", listPage(d.Log.BadMessages), read},
		{http.MethodGet, "/v1/bad-messages/:msg_id", badMessage(d.Log), read},
		{http.MethodGet, "/v1/audit", listPage(d.Log.Audit), read},
		// Operator actions: an operator's token, which names who acts, checked in the handler.
		{http.MethodPost, "/v1/dead-letters/:user_id/:seq/replay", replay(d), nil},
	}
	if d.Gate != nil {
		routes = append(routes,
			route{http.MethodGet, "/v1/gate", gateState(d.Gate), read},
			route{http.MethodPost, "/v1/gate/:user_id/skip", skip(d), nil},
			route{http.MethodPost, "/v1/gate/:user_id/skip-through", skipThrough(d), nil})
	}
	for _, r := range routes {
		e.Add(r.method, r.path, r.handler, r.mw...)
	}
	httpx.Document(e, "/openapi.yaml", "application/yaml", OpenAPI)
}

// listUserSMS serves GET /v1/users/{id}/sms: a page of the user's finished SMS, in seq order.
func listUserSMS(s *smslog.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := positiveInt(c.Param("id"), "user id")
		if err != nil {
			return err
		}
		limit, err := limitParam(c)
		if err != nil {
			return err
		}
		p, err := s.UserSMSPage(c.Request().Context(), id, limit, c.QueryParam("cursor"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, p)
	}
}

// listUsers serves GET /v1/users: a page of the users, all of them or (?phone=) those with
// an SMS to a phone number.
func listUsers(s *smslog.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		limit, err := limitParam(c)
		if err != nil {
			return err
		}
		phone := c.QueryParam("phone")
		if c.QueryParams().Has("phone") && phone == "" {
			return apperr.New(apperr.Invalid, "query parameter phone must not be empty: leave it out for every user")
		}
		p, err := s.Users(c.Request().Context(), limit, c.QueryParam("cursor"), phone)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, p)
	}
}

// listPage serves a paginated listing: ?limit= and ?cursor= go to fetch, its page comes back
// as JSON.
func listPage[P any](fetch func(ctx context.Context, limit int, cursor string) (P, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		limit, err := limitParam(c)
		if err != nil {
			return err
		}
		p, err := fetch(c.Request().Context(), limit, c.QueryParam("cursor"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, p)
	}
}

// badMessage serves GET /v1/bad-messages/{msg_id}: one bad message, its body whole (a page of
// the list carries only each body's start).
func badMessage(s *smslog.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		m, err := s.BadMessage(c.Request().Context(), c.Param("msg_id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, m)
	}
}

// noStore marks a response as not cacheable (the page's live feed).
func noStore(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-store")
		return h(c)
	}
}

// MaxReasonLen bounds the reason an operator gives for an action.
const MaxReasonLen = httpx.MaxReasonLen

type replayRequest struct {
	Reason string `json:"reason"`
}

func replay(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req replayRequest
		actor, err := httpx.OperatorRequest(c, d.Operators, &req, &req.Reason)
		if err != nil {
			return err
		}
		userID, err := positiveInt(c.Param("user_id"), "user id")
		if err != nil {
			return err
		}
		seq, err := positiveInt(c.Param("seq"), "seq")
		if err != nil {
			return err
		}
		res, err := d.Operator.Replay(c.Request().Context(), actor, userID, seq, req.Reason)
		if err != nil {
			return err
		}
		d.Logger.InfoContext(c.Request().Context(), "dead letter replayed", "user_id", userID, "seq", seq, "replay", res.Replay,
			"idempotency_key", res.IdempotencyKey, "actor", actor, "reason", req.Reason)
		d.Gate.forget() // the operator's next look shows the replay
		return c.JSON(http.StatusOK, res)
	}
}

type skipRequest struct {
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
}

func (r *skipRequest) seq() int64 { return r.Seq }

// skipOf reads an operator's skip request into req (its reason into reason): who acts, the
// user of the path, and the seq the body names (seq, read once req is decoded), which must
// be positive (else an Invalid error saying what).
func skipOf(c echo.Context, d Deps, req any, reason *string, seq func() int64, what string) (actor string, userID int64, err error) {
	if actor, err = httpx.OperatorRequest(c, d.Operators, req, reason); err != nil {
		return "", 0, err
	}
	if userID, err = positiveInt(c.Param("user_id"), "user id"); err != nil {
		return "", 0, err
	}
	if s := seq(); s <= 0 {
		return "", 0, apperr.New(apperr.Invalid, "%s, got %d", what, s)
	}
	return actor, userID, nil
}

// skip serves POST /v1/gate/{user_id}/skip: the operator states which seq is lost (it must
// be the one the user is held by) and why; the gate records it skipped_by_operator and
// advances the user, in one transaction with the audit row.
func skip(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req skipRequest
		actor, userID, err := skipOf(c, d, &req, &req.Reason, req.seq, "seq must be the positive seq that is lost")
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		last, err := d.Operator.Skip(ctx, actor, userID, req.Seq, req.Reason)
		switch {
		case errors.Is(err, gate.ErrNotHeld):
			return apperr.Wrap(err, apperr.Conflict, "user %d is not held waiting for seq %d (see the gaps in GET /v1/gate)", userID, req.Seq)
		case errors.Is(err, gate.ErrNotLost):
			return apperr.Wrap(err, apperr.Conflict, "seq %d of user %d has arrived; it is not lost and will be delivered", req.Seq, userID)
		case err != nil:
			return err
		}
		d.Logger.WarnContext(ctx, "missing seq skipped", "user_id", userID, "seq", req.Seq, "last_seq", last, "actor", actor, "reason", req.Reason)
		d.Gate.Lanes.Wake()
		d.Gate.forget() // the operator's next look shows the skip
		return c.JSON(http.StatusOK, map[string]any{"user_id": userID, "skipped_seq": req.Seq, "last_seq": last})
	}
}

type skipThroughRequest struct {
	Through int64  `json:"through"`
	Reason  string `json:"reason"`
}

func (r *skipThroughRequest) through() int64 { return r.Through }

// skipThrough serves POST /v1/gate/{user_id}/skip-through: the operator states the last seq
// of a range the broker no longer has (from the user's next seq on) and why; the gate records
// every seq of it that never arrived skipped_by_operator and advances the user, in one
// transaction with one audit row. For a restore of the notifier's database, or a group's
// first start, where one skip per seq would take thousands of calls.
func skipThrough(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req skipThroughRequest
		actor, userID, err := skipOf(c, d, &req, &req.Reason, req.through, "through must be the positive last seq to skip")
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		r, err := d.Operator.SkipThrough(ctx, actor, userID, req.Through, req.Reason)
		switch {
		case errors.Is(err, gate.ErrNotHeld):
			return apperr.Wrap(err, apperr.Conflict, "user %d is not held by seqs up to %d: its next seq is past it, or no SMS after it waits (see the gaps in GET /v1/gate)", userID, req.Through)
		case errors.Is(err, gate.ErrSkipRangeTooLong):
			// 409, not 400: the request is well formed; where the user stands makes it too long.
			return apperr.Wrap(err, apperr.Conflict, "skip at most %d seqs at once: through must be below user %d's next seq + %d", gate.MaxSkipRange, userID, gate.MaxSkipRange)
		case err != nil:
			return err
		}
		d.Logger.WarnContext(ctx, "missing seqs skipped", "user_id", userID, "from_seq", r.From, "through_seq", r.Through, "skipped", r.Skipped,
			"last_seq", r.LastSeq, "actor", actor, "reason", req.Reason)
		d.Gate.Lanes.Wake()
		d.Gate.forget() // the operator's next look shows the skip
		return c.JSON(http.StatusOK, map[string]any{"user_id": userID, "from_seq": r.From, "through_seq": r.Through, "skipped": r.Skipped, "last_seq": r.LastSeq})
	}
}

// gateBody is GET /v1/gate.
type gateBody struct {
	gate.View
	DLQUnpublished int64                `json:"dlq_unpublished"` // dead letters not yet in the DLQ topic
	Breaker        senders.BreakerState `json:"breaker"`
	Workers        int                  `json:"workers"`
	Busy           int64                `json:"busy"`
	Lanes          gate.LaneStats       `json:"lanes"`
	Inbox          inbox.Stats          `json:"inbox"`
	Retry          retryBody            `json:"retry_policy"`
	GapAlertAfter  string               `json:"gap_alert_after"`
}

type retryBody struct {
	Base            string `json:"base"`
	Max             string `json:"max"`
	MaxAttempts     int    `json:"max_attempts"`
	DeadLetterAfter string `json:"dead_letter_after"`
}

// gateState serves GET /v1/gate: the provider breaker, the lanes (workers, what they did),
// the inbox (what it received, what it holds), users held by a gap (longest first, alerts
// marked) and users that started at a baseline, and the retry policy.
func gateState(g *Gate) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, err := g.read(c.Request().Context())
		if err != nil {
			return err
		}
		p := g.Lanes.Policy()
		return c.JSON(http.StatusOK, gateBody{
			View: r.view, DLQUnpublished: r.backlog, Breaker: g.Lanes.Breaker().State(), Workers: g.Lanes.Workers(), Busy: g.Lanes.Busy(),
			Lanes: g.Lanes.Stats(), Inbox: g.Inbox.Stats(), GapAlertAfter: g.GapAlertAfter.String(),
			Retry: retryBody{Base: p.Base.String(), Max: p.Max.String(), MaxAttempts: p.MaxAttempts, DeadLetterAfter: p.DeadLetterAfter.String()},
		})
	}
}

func positiveInt(s, what string) (int64, error) {
	n, ok := httpx.Digits(s)
	if !ok || n <= 0 {
		return 0, apperr.New(apperr.Invalid, "%s must be a positive integer, got %q", what, s)
	}
	return n, nil
}

// limitParam reads ?limit= (absent: 0, the store's default); given empty, it is refused.
func limitParam(c echo.Context) (int, error) {
	if !c.QueryParams().Has("limit") {
		return 0, nil
	}
	s := c.QueryParam("limit")
	n, ok := httpx.Digits(s)
	if !ok || n <= 0 || n > math.MaxInt32 {
		return 0, apperr.New(apperr.Invalid, "limit must be a positive integer, got %q", s)
	}
	return int(n), nil
}
