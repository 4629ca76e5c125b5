package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// WaitLimit is how long ?wait=true waits for a saga to end before answering 202.
const WaitLimit = 10 * time.Second

// IdempotencyHeader is the request header that makes an operation idempotent per user.
const IdempotencyHeader = "Idempotency-Key"

// Amounts and ids stay raw JSON so that a string, a fraction or an exponent gets a message
// that says so, instead of a generic type error or a silent conversion.
type depositRequest struct {
	Amount json.RawMessage `json:"amount"`
	Source json.RawMessage `json:"source"`
}

type purchaseRequest struct {
	Amount    json.RawMessage `json:"amount"`
	Merchant  string          `json:"merchant"`
	Reference string          `json:"reference"`
}

type withdrawalRequest struct {
	Amount      json.RawMessage `json:"amount"`
	Destination string          `json:"destination"`
}

type transferRequest struct {
	From   json.RawMessage `json:"from"`
	To     json.RawMessage `json:"to"`
	Amount json.RawMessage `json:"amount"`
}

// userOperation reads what every operation on one user's wallet starts with, in this order:
// the user in the path (for whom the caller must be allowed to act), the wait and
// Idempotency-Key parameters, and the JSON body into req.
func userOperation(c echo.Context, who caller, req any) (id int64, wait bool, key string, err error) {
	if id, err = pathUser(c, who); err != nil {
		return 0, false, "", err
	}
	if wait, key, err = operationParams(c); err != nil {
		return 0, false, "", err
	}
	if err = httpx.DecodeJSON(c, req); err != nil {
		return 0, false, "", err
	}
	return id, wait, key, nil
}

func deposit(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		var req depositRequest
		id, wait, key, err := userOperation(c, who, &req)
		if err != nil {
			return err
		}
		amount, err := wallet.ParseAmount("amount", string(req.Amount))
		if err != nil {
			return err
		}
		source, err := optional("source", req.Source)
		if err != nil {
			return err
		}
		if err := authorizeSource(who, source); err != nil {
			return err
		}
		op, err := svc.Deposit(c.Request().Context(), wallet.DepositRequest{UserID: id, Amount: amount, Source: source, IdempotencyKey: key, Background: !wait})
		return answerOperation(c, svc, op, wait, err)
	}
}

func purchase(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		var req purchaseRequest
		id, wait, key, err := userOperation(c, who, &req)
		if err != nil {
			return err
		}
		amount, err := wallet.ParseAmount("amount", string(req.Amount))
		if err != nil {
			return err
		}
		op, err := svc.Purchase(c.Request().Context(), wallet.PurchaseRequest{
			UserID: id, Amount: amount, Merchant: req.Merchant, Reference: req.Reference, IdempotencyKey: key, Background: !wait,
		})
		return answerOperation(c, svc, op, wait, err)
	}
}

func withdraw(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		var req withdrawalRequest
		id, wait, key, err := userOperation(c, who, &req)
		if err != nil {
			return err
		}
		amount, err := wallet.ParseAmount("amount", string(req.Amount))
		if err != nil {
			return err
		}
		op, err := svc.Withdraw(c.Request().Context(), wallet.WithdrawalRequest{
			UserID: id, Amount: amount, Destination: req.Destination, IdempotencyKey: key, Background: !wait,
		})
		return answerOperation(c, svc, op, wait, err)
	}
}

func transfer(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		wait, key, err := operationParams(c)
		if err != nil {
			return err
		}
		var req transferRequest
		if err := httpx.DecodeJSON(c, &req); err != nil {
			return err
		}
		from, err := bodyID("from", req.From)
		if err != nil {
			return err
		}
		to, err := bodyID("to", req.To)
		if err != nil {
			return err
		}
		amount, err := wallet.ParseAmount("amount", string(req.Amount))
		if err != nil {
			return err
		}
		if err := authorize(who, access{kind: mayPay, user: from}); err != nil {
			return err
		}
		if from == to {
			// Well formed, and refused by a rule JSON Schema cannot state (two fields equal):
			// 422, like the other well-formed requests the wallet refuses.
			return apperr.New(apperr.Unprocessable, "cannot transfer to oneself: from and to are both %d", from)
		}
		op, err := svc.Transfer(c.Request().Context(), wallet.TransferRequest{From: from, To: to, Amount: amount, IdempotencyKey: key, Background: !wait})
		return answerOperation(c, svc, op, wait, err)
	}
}

// answerOperation answers a started (or replayed) saga: 202 with a Location, or with
// wait, 200 once terminal (202 if still running after WaitLimit). A saga run inline comes
// back terminal unless it waits in a backoff; only then, or for a replayed one still
// running, does the answer wait for recovery.
func answerOperation(c echo.Context, svc *wallet.Service, op wallet.Operation, wait bool, err error) error {
	if err != nil {
		return err
	}
	if wait && !op.State.Terminal() {
		ctx, cancel := context.WithTimeout(c.Request().Context(), WaitLimit)
		defer cancel()
		if op, err = svc.WaitSaga(ctx, op.ID); err != nil {
			return err
		}
	}
	h := c.Response().Header()
	h.Set(echo.HeaderLocation, "/v1/sagas/"+strconv.FormatInt(op.ID, 10))
	if op.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	status := http.StatusAccepted
	if wait && op.State.Terminal() {
		status = http.StatusOK
	}
	return c.JSON(status, toSagaBody(op, true, forUser))
}

// operationParams reads ?wait= (true or false, spelled so: strconv's "1", "T" or "FALSE"
// would be a second spelling the document does not have) and the Idempotency-Key header.
func operationParams(c echo.Context) (wait bool, key string, err error) {
	if c.QueryParams().Has("wait") {
		switch raw := c.QueryParam("wait"); raw {
		case "true":
			wait = true
		case "false":
		default:
			return false, "", apperr.New(apperr.Invalid, "query parameter wait must be true or false, got %q", raw)
		}
	}
	vals := c.Request().Header.Values(IdempotencyHeader)
	switch {
	case len(vals) > 1:
		return false, "", apperr.New(apperr.Invalid, "send one %s header, got %d", IdempotencyHeader, len(vals))
	case len(vals) == 1:
		key = vals[0]
		if err := wallet.ValidateIdempotencyKey(key); err != nil {
			return false, "", err
		}
	}
	return wait, key, nil
}
