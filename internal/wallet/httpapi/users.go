package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

type walletBody struct {
	UserID   int64  `json:"user_id"`
	Balance  int64  `json:"balance"`
	Currency string `json:"currency"`
	LastSeq  int64  `json:"last_seq"`
}

type userBody struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Phone     string     `json:"phone"`
	Locale    string     `json:"locale"`
	CreatedAt time.Time  `json:"created_at"`
	Wallet    walletBody `json:"wallet"`
}

type eventBody struct {
	Seq          int64     `json:"seq"`
	Kind         string    `json:"kind"`
	Amount       int64     `json:"amount"`
	Currency     string    `json:"currency"`
	BalanceAfter int64     `json:"balance_after"`
	SagaID       int64     `json:"saga_id"`
	OccurredAt   time.Time `json:"occurred_at"`
	Published    bool      `json:"published"`
}

func toWalletBody(w wallet.Wallet) walletBody {
	return walletBody{UserID: w.UserID, Balance: int64(w.Balance), Currency: w.Currency, LastSeq: w.LastSeq}
}

// Optional text fields stay raw JSON: absent, the default applies; given, they must be a
// non-empty string (null or "" is refused, as the OpenAPI document says).
type createUserRequest struct {
	Name   string          `json:"name"`
	Phone  string          `json:"phone"`
	Locale json.RawMessage `json:"locale"`
}

func createUser(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		if err := authorize(who, access{kind: mayCreateUser}); err != nil {
			return err
		}
		var req createUserRequest
		if err := httpx.DecodeJSON(c, &req); err != nil {
			return err
		}
		locale, err := optional("locale", req.Locale)
		if err != nil {
			return err
		}
		u, w, err := svc.CreateUser(c.Request().Context(), wallet.NewUser{Name: req.Name, Phone: req.Phone, Locale: locale})
		if err != nil {
			return err
		}
		c.Response().Header().Set(echo.HeaderLocation, "/v1/users/"+strconv.FormatInt(u.ID, 10)+"/wallet")
		return c.JSON(http.StatusCreated, userBody{
			ID: u.ID, Name: u.Name, Phone: u.Phone, Locale: u.Locale, CreatedAt: u.CreatedAt, Wallet: toWalletBody(w),
		})
	}
}

func getWallet(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		id, err := pathUser(c, who)
		if err != nil {
			return err
		}
		w, err := svc.GetWallet(c.Request().Context(), id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toWalletBody(w))
	}
}

func listEvents(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		id, err := pathUser(c, who)
		if err != nil {
			return err
		}
		var f wallet.EventFilter
		if f.AfterSeq, err = queryInt(c, "after", 0); err != nil {
			return err
		}
		limit, err := queryInt(c, "limit", 1)
		if err != nil {
			return err
		}
		f.Limit = int(min(limit, 1_000_000))
		if f.Limit == 0 {
			f.Limit = wallet.DefaultEventPage
		}
		evs, err := svc.ListEvents(c.Request().Context(), id, f)
		if err != nil {
			return err
		}
		items := make([]eventBody, 0, len(evs))
		for _, e := range evs {
			items = append(items, eventBody{
				Seq: e.Seq, Kind: string(e.Kind), Amount: int64(e.Amount), Currency: e.Currency,
				BalanceAfter: int64(e.BalanceAfter), SagaID: e.SagaID, OccurredAt: e.OccurredAt, Published: e.Published,
			})
		}
		body := struct {
			Items      []eventBody `json:"items"`
			NextCursor string      `json:"next_cursor,omitempty"`
		}{Items: items}
		// A full page may have a next one: it starts after the last seq of this one.
		if len(items) > 0 && len(items) == f.Limit {
			body.NextCursor = strconv.FormatInt(items[len(items)-1].Seq, 10)
		}
		return c.JSON(http.StatusOK, body)
	}
}
