// Package httpapi is the notifier's HTTP side on echo: the SMS log read API, the dead-letter
// admin API and the live page. Errors go out as {"error":{"code","message"}} through
// apperr's one code→status table (see httpx).
package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/web"
)

// Deps is what the notifier's HTTP API needs.
type Deps struct {
	Store *notify.Store
	// Sender re-sends replayed dead letters; use the gate's sender (with its failure switch,
	// if the operator wants replays to meet the same switches).
	Sender notify.Sender
	// AdminToken guards the replay endpoint (Authorization: Bearer <token>). Empty disables
	// replays: every request is refused with 403.
	AdminToken string
	Logger     *slog.Logger // slog.Default() when nil
}

// Register adds every route of the notifier's API and page to e. This is the one list.
func Register(e *echo.Echo, d Deps) {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	assets := http.StripPrefix("/assets/", http.FileServerFS(web.FS))
	routes := []struct {
		method, path string
		handler      echo.HandlerFunc
	}{
		{http.MethodGet, "/", page()},
		{http.MethodGet, "/assets/*", echo.WrapHandler(assets)},
		{http.MethodGet, "/v1/users", listUsers(d.Store)},
		{http.MethodGet, "/v1/users/:id/sms", listUserSMS(d.Store)},
		{http.MethodGet, "/v1/sms", listChanges(d.Store)},
		{http.MethodGet, "/v1/dead-letters", listDeadLetters(d.Store)},
		{http.MethodGet, "/v1/bad-messages", listBadMessages(d.Store)},
		{http.MethodPost, "/v1/dead-letters/:user_id/:seq/replay", replay(d)},
	}
	for _, r := range routes {
		e.Add(r.method, r.path, r.handler)
	}
}

// page serves the SMS log page, allowed to load only its own assets.
func page() echo.HandlerFunc {
	return func(c echo.Context) error {
		b, err := fs.ReadFile(web.FS, "index.html")
		if err != nil {
			return apperr.Wrap(err, apperr.Internal, "the page is missing from the binary")
		}
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'")
		h.Set("Cache-Control", "no-cache")
		return c.Blob(http.StatusOK, "text/html; charset=utf-8", b)
	}
}

type userSMSBody struct {
	UserID int64            `json:"user_id"`
	Items  []notify.SMSItem `json:"items"`
}

func listUserSMS(s *notify.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := positiveInt(c.Param("id"), "user id")
		if err != nil {
			return err
		}
		items, err := s.UserSMS(c.Request().Context(), id, 0)
		if err != nil {
			return err
		}
		if items == nil {
			items = []notify.SMSItem{}
		}
		return c.JSON(http.StatusOK, userSMSBody{UserID: id, Items: items})
	}
}

func listUsers(s *notify.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		limit, err := limitParam(c)
		if err != nil {
			return err
		}
		p, err := s.Users(c.Request().Context(), limit, c.QueryParam("cursor"))
		if err != nil {
			return err
		}
		if p.Items == nil {
			p.Items = []notify.UserSummary{}
		}
		return c.JSON(http.StatusOK, p)
	}
}

func listChanges(s *notify.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		limit, err := limitParam(c)
		if err != nil {
			return err
		}
		p, err := s.Changes(c.Request().Context(), limit, c.QueryParam("cursor"))
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, p)
	}
}

func listDeadLetters(s *notify.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		limit, err := limitParam(c)
		if err != nil {
			return err
		}
		p, err := s.DeadLetters(c.Request().Context(), limit, c.QueryParam("cursor"))
		if err != nil {
			return err
		}
		if p.Items == nil {
			p.Items = []notify.DeadLetter{}
		}
		return c.JSON(http.StatusOK, p)
	}
}

func listBadMessages(s *notify.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		limit, err := limitParam(c)
		if err != nil {
			return err
		}
		p, err := s.BadMessages(c.Request().Context(), limit, c.QueryParam("cursor"))
		if err != nil {
			return err
		}
		if p.Items == nil {
			p.Items = []notify.BadMessage{}
		}
		return c.JSON(http.StatusOK, p)
	}
}

// MaxReasonLen bounds the reason an operator gives for a replay.
const MaxReasonLen = 500

type replayRequest struct {
	Reason string `json:"reason"`
}

func replay(d Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := checkAdmin(c, d.AdminToken); err != nil {
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
		var req replayRequest
		if c.Request().ContentLength != 0 {
			if err := httpx.DecodeJSON(c, &req); err != nil {
				return err
			}
		}
		req.Reason = strings.TrimSpace(req.Reason)
		if len(req.Reason) > MaxReasonLen {
			return apperr.New(apperr.Invalid, "reason must be at most %d bytes, got %d", MaxReasonLen, len(req.Reason))
		}
		res, err := d.Store.Replay(c.Request().Context(), d.Sender, "admin", userID, seq, req.Reason)
		if err != nil {
			return err
		}
		d.Logger.Info("dead letter replayed", "user_id", userID, "seq", seq, "replay", res.Replay,
			"idempotency_key", res.IdempotencyKey, "reason", req.Reason)
		return c.JSON(http.StatusOK, res)
	}
}

// checkAdmin accepts "Authorization: Bearer <token>" with the configured token, compared in
// constant time (over digests, so the length does not leak either).
func checkAdmin(c echo.Context, token string) error {
	if token == "" {
		return apperr.New(apperr.Forbidden, "replays are disabled: no admin token is configured")
	}
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	scheme, given, ok := strings.Cut(strings.TrimSpace(h), " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(given) == "" {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="notifier"`)
		return apperr.New(apperr.Unauthorized, "an admin token is required: Authorization: Bearer <token>")
	}
	want := sha256.Sum256([]byte(token))
	got := sha256.Sum256([]byte(strings.TrimSpace(given)))
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		return apperr.New(apperr.Forbidden, "the admin token is not valid")
	}
	return nil
}

func positiveInt(s, what string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, apperr.New(apperr.Invalid, "%s must be a positive integer, got %q", what, s)
	}
	return n, nil
}

func limitParam(c echo.Context) (int, error) {
	s := c.QueryParam("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, apperr.New(apperr.Invalid, "limit must be a positive integer, got %q", s)
	}
	return n, nil
}
