package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// WaitLimit is how long ?wait=true waits for a saga to end before answering 202.
const WaitLimit = 10 * time.Second

// IdempotencyHeader is the request header that makes an operation idempotent per user.
const IdempotencyHeader = "Idempotency-Key"

// --- response bodies ---

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

// --- request bodies ---

// Optional text fields stay raw JSON: absent, the default applies; given, they must be a
// non-empty string (null or "" is refused, as the OpenAPI document says).
type createUserRequest struct {
	Name   string          `json:"name"`
	Phone  string          `json:"phone"`
	Locale json.RawMessage `json:"locale"`
}

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

// --- handlers ---

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

// operatorSagas serves GET /v1/operator/sagas, the operator console's list: every user's
// sagas in one state (or all), newest first, a page at a time, with the admin token; their
// errors as stored.
func operatorSagas(svc *wallet.Service, adminToken string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := httpx.CheckBearer(c, "admin", "operator endpoints are disabled: no admin token is configured", adminToken); err != nil {
			return err
		}
		return answerSagaPage(c, svc, wallet.SagaFilter{}, forOperator)
	}
}

// operatorSaga serves GET /v1/operator/sagas/{id}: a saga with its step history and every
// error as stored (the remote party's words, its address), with the admin token.
func operatorSaga(svc *wallet.Service, adminToken string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := httpx.CheckBearer(c, "admin", "operator endpoints are disabled: no admin token is configured", adminToken); err != nil {
			return err
		}
		id, err := pathID(c, "saga id")
		if err != nil {
			return err
		}
		op, err := svc.GetSaga(c.Request().Context(), id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toSagaBody(op, true, forOperator))
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

// --- parameters ---

// pathID parses the :id path parameter: a positive int64, else 400.
func pathID(c echo.Context, what string) (int64, error) {
	raw := c.Param("id")
	id, ok := httpx.Digits(raw)
	if !ok || id <= 0 {
		return 0, apperr.New(apperr.Invalid, "%s must be a positive 64-bit integer, got %q", what, raw)
	}
	return id, nil
}

// pathUser parses the :id path parameter of a user's route and authorizes who to act for
// that user.
func pathUser(c echo.Context, who caller) (int64, error) {
	id, err := pathID(c, "user id")
	if err != nil {
		return 0, err
	}
	if err := authorize(who, access{kind: mayActFor, user: id}); err != nil {
		return 0, err
	}
	return id, nil
}

// queryInt parses an optional integer query parameter (absent: 0) that must be >= least;
// given empty, it is refused rather than taken as absent.
func queryInt(c echo.Context, name string, least int64) (int64, error) {
	if !c.QueryParams().Has(name) {
		return 0, nil
	}
	raw := c.QueryParam(name)
	n, ok := httpx.Digits(raw)
	if !ok || n < least {
		return 0, apperr.New(apperr.Invalid, "query parameter %s must be an integer >= %d, got %q", name, least, raw)
	}
	return n, nil
}

// bodyID parses a user id given in a JSON body: a positive integer.
func bodyID(field string, raw json.RawMessage) (int64, error) {
	lit := strings.TrimSpace(string(raw))
	if lit == "" || lit == "null" {
		return 0, apperr.New(apperr.Invalid, "%s is required", field)
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil || n <= 0 || strings.HasPrefix(lit, "+") {
		return 0, apperr.New(apperr.Invalid, "%s must be a positive integer user id, got %s", field, freetext.Clip(lit, 40))
	}
	return n, nil
}

// optional returns an optional text field's value: "" when absent (the default applies);
// given, it must be a non-empty string.
func optional(field string, raw json.RawMessage) (string, error) {
	if raw == nil {
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", apperr.New(apperr.Invalid, "%s must be a string (leave it out for the default), got %s", field, freetext.Clip(string(raw), 40))
	}
	if v == "" {
		return "", apperr.New(apperr.Invalid, "%s must not be empty: leave it out for the default", field)
	}
	return v, nil
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

// --- operator actions ---

type operatorRequest struct {
	Reason string `json:"reason"`
}

// operatorAction serves POST /v1/sagas/{id}/retry and /resolve: admin token, X-Operator,
// a required reason; the action and its audit row commit together.
func operatorAction(adminToken string,
	act func(context.Context, int64, wallet.OperatorAction) (wallet.Operation, error),
) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req operatorRequest
		actor, err := httpx.OperatorRequest(c, adminToken, &req, &req.Reason)
		if err != nil {
			return err
		}
		id, err := pathID(c, "saga id")
		if err != nil {
			return err
		}
		op, err := act(c.Request().Context(), id, wallet.OperatorAction{Actor: actor, Reason: req.Reason})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toSagaBody(op, true, forOperator))
	}
}

// sagaAudit serves GET /v1/sagas/{id}/audit: the operator actions recorded on a saga.
func sagaAudit(svc *wallet.Service, adminToken string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := httpx.CheckBearer(c, "admin", "operator endpoints are disabled: no admin token is configured", adminToken); err != nil {
			return err
		}
		id, err := pathID(c, "saga id")
		if err != nil {
			return err
		}
		if _, err := svc.GetSaga(c.Request().Context(), id); err != nil {
			return err
		}
		items, err := svc.SagaAudit(c.Request().Context(), id)
		if err != nil {
			return err
		}
		if items == nil {
			items = []wallet.AuditEntry{}
		}
		return c.JSON(http.StatusOK, map[string]any{"items": items})
	}
}
