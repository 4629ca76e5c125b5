package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type stepBody struct {
	Name     string     `json:"name"`
	Phase    string     `json:"phase"`
	Status   string     `json:"status"`
	Attempts int        `json:"attempts"`
	Error    *errorBody `json:"error"`
}

type sagaBody struct {
	ID             int64  `json:"id"`
	Kind           string `json:"kind"`
	State          string `json:"state"`
	UserID         int64  `json:"user_id"`
	CounterpartyID int64  `json:"counterparty_id,omitempty"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Source         string `json:"source,omitempty"`
	Merchant       string `json:"merchant,omitempty"`
	Reference      string `json:"reference,omitempty"`
	Destination    string `json:"destination,omitempty"`
	// ProviderKeyPrefix starts the idempotency keys of the saga's calls to the gateway or the
	// merchant (not in list pages): what an operator asks them about.
	ProviderKeyPrefix string     `json:"provider_key_prefix,omitempty"`
	Steps             []stepBody `json:"steps,omitempty"`
	Error             *errorBody `json:"error"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
}

func toErrorBody(e *saga.ErrorInfo) *errorBody {
	if e == nil {
		return nil
	}
	return &errorBody{Code: e.Code, Message: e.Message}
}

// errorsAs says how a saga body shows the saga's error and its steps': as its user reads
// them (classified, see wallet.PublicError) or as an operator does (as stored).
type errorsAs int

const (
	forUser errorsAs = iota
	forOperator
)

func (a errorsAs) body(e *saga.ErrorInfo) *errorBody {
	if a == forUser {
		e = wallet.PublicError(e)
	}
	return toErrorBody(e)
}

func toSagaBody(op wallet.Operation, withSteps bool, errs errorsAs) sagaBody {
	b := sagaBody{
		ID: op.ID, Kind: op.Kind, State: string(op.State), UserID: op.UserID, CounterpartyID: op.CounterpartyID,
		Amount: int64(op.Amount), Currency: op.Currency, Source: op.Source, Merchant: op.Merchant, Reference: op.Reference,
		Destination: op.Destination, Error: errs.body(op.Error), CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
	}
	if withSteps {
		b.ProviderKeyPrefix = op.ProviderKeyPrefix
		b.Steps = make([]stepBody, 0, len(op.Steps))
		for _, s := range op.Steps {
			b.Steps = append(b.Steps, stepBody{Name: s.Name, Phase: s.Phase, Status: s.Status, Attempts: s.Attempts, Error: errs.body(s.Error)})
		}
	}
	return b
}

func getSaga(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		id, err := pathID(c, "saga id")
		if err != nil {
			return err
		}
		op, err := svc.GetSaga(c.Request().Context(), id)
		if err != nil {
			return err
		}
		if err := authorize(who, access{kind: mayReadSaga, user: op.UserID, counterparty: op.CounterpartyID, saga: op.ID}); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toSagaBody(op, true, forUser))
	}
}

func listSagas(svc *wallet.Service) userHandler {
	return func(c echo.Context, who caller) error {
		var f wallet.SagaFilter
		var err error
		if f.UserID, err = queryInt(c, "user_id", 1); err != nil {
			return err
		}
		if err := authorize(who, access{kind: mayListSagas, user: f.UserID}); err != nil {
			return err
		}
		f.UserID = sagaListUser(who, f.UserID)
		return answerSagaPage(c, svc, f, forUser)
	}
}

// answerSagaPage reads ?limit=, ?cursor= and ?state= into f, and answers the page of sagas.
func answerSagaPage(c echo.Context, svc *wallet.Service, f wallet.SagaFilter, errs errorsAs) error {
	limit, err := queryInt(c, "limit", 1)
	if err != nil {
		return err
	}
	f.Limit = int(min(limit, 1_000_000))
	if f.Cursor, err = queryInt(c, "cursor", 1); err != nil {
		return err
	}
	if c.QueryParams().Has("state") {
		if f.State = saga.State(c.QueryParam("state")); f.State == "" {
			return apperr.New(apperr.Invalid, "query parameter state must not be empty: leave it out for every state")
		}
	}
	page, err := svc.ListSagas(c.Request().Context(), f)
	if err != nil {
		return err
	}
	body := struct {
		Items      []sagaBody `json:"items"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}{Items: make([]sagaBody, 0, len(page.Items))}
	for _, op := range page.Items {
		body.Items = append(body.Items, toSagaBody(op, false, errs))
	}
	if page.NextCursor != 0 {
		body.NextCursor = strconv.FormatInt(page.NextCursor, 10)
	}
	return c.JSON(http.StatusOK, body)
}
