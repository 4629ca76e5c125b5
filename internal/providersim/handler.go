package providersim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/walletsaga/walletsaga/internal/provider"
)

// PathOutages is the simulator-only control endpoint that switches outages.
const PathOutages = "/sim/outages"

// maxRequest bounds a request body.
const maxRequest = 64 << 10

// Handler returns the simulator's HTTP handler. This is every route: the contract's six
// operations (bearer token), GET /healthz and GET /openapi.yaml (open), and the control
// endpoint POST /sim/outages (bearer token), which no real provider has.
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+provider.PathCharges, s.contract(TargetGateway, s.charge))
	mux.HandleFunc("POST "+provider.PathRefunds, s.contract(TargetGateway, s.refund))
	mux.HandleFunc("POST "+provider.PathOrders, s.contract(TargetMerchant, s.placeOrder))
	mux.HandleFunc("POST "+provider.PathOrderCancellations, s.contract(TargetMerchant, s.cancelOrder))
	mux.HandleFunc("POST "+provider.PathPayouts, s.contract(TargetGateway, s.payout))
	mux.HandleFunc("POST "+provider.PathPayoutCancellations, s.contract(TargetGateway, s.cancelPayout))
	mux.HandleFunc("POST "+PathOutages, s.authorized(s.outage))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, answer{http.StatusOK, map[string]string{"status": "ok"}})
	})
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(provider.OpenAPI())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, refusal(http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// operation is one of the contract's operations: it reads the request, does the work and
// returns the answer, and whether the work was done (only then can its answer be lost).
type operation func(ctx context.Context, key string, body []byte) (a answer, done bool)

// contract wraps an operation of target with what every call goes through, in order: the
// target's outage, the bearer token, the Idempotency-Key, the key held while the call is
// processed (another call under it meanwhile is 409 in_progress), the latency, the injected
// failure before the work, and the injected lost response after it.
func (s *Simulator) contract(target string, op operation) http.HandlerFunc {
	return s.authorizedAfterOutage(target, func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(provider.HeaderIdempotencyKey)
		if !validKey(key) {
			writeJSON(w, refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "%s must be 1–255 printable ASCII characters without spaces", provider.HeaderIdempotencyKey))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
		if err != nil {
			writeJSON(w, refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "body: %v", err))
			return
		}
		release, held := s.hold(r.URL.Path, key)
		if !held {
			// The one meaning of 409: known, not finished. A finished call's key is answered
			// with its result, by the store, never so.
			writeJSON(w, refusal(http.StatusConflict, provider.CodeInProgress,
				"a call with this %s is still being processed; ask again later", provider.HeaderIdempotencyKey))
			return
		}
		defer release()
		if !s.wait(r.Context()) {
			writeJSON(w, refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "simulated %s: gave up waiting", target))
			return
		}
		inject := s.draw()
		if inject == injectBefore {
			writeJSON(w, refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "simulated %s failure", target))
			return
		}
		a, done := op(r.Context(), key, body)
		if done && inject == injectAfter {
			loseResponse(w)
			return
		}
		writeJSON(w, a)
	})
}

// authorizedAfterOutage answers for target's outage first (an outage answers nothing, or
// 503, to anyone), then checks the token.
func (s *Simulator) authorizedAfterOutage(target string, next http.HandlerFunc) http.HandlerFunc {
	auth := s.authorized(next)
	return func(w http.ResponseWriter, r *http.Request) {
		o := s.outageOf(target)
		switch o.mode {
		case OutageFail:
			writeJSON(w, refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "simulated %s outage", target))
			return
		case OutageTimeout:
			// Read the body, or the server would not notice the caller hang up.
			_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxRequest))
			t := time.NewTimer(time.Until(o.until))
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-s.closed:
			case <-t.C:
			}
			writeJSON(w, refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "simulated %s outage: no answer", target))
			return
		}
		auth(w, r)
	}
}

// authorized checks the bearer token.
func (s *Simulator) authorized(next http.HandlerFunc) http.HandlerFunc {
	want := []byte("Bearer " + s.opts.Token)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeJSON(w, refusal(http.StatusUnauthorized, provider.CodeUnauthorized, "a bearer token is required, and this is not it"))
			return
		}
		next(w, r)
	}
}

func (s *Simulator) charge(ctx context.Context, key string, body []byte) (answer, bool) {
	var req provider.ChargeRequest
	if a, ok := decode(body, &req); !ok {
		return a, false
	}
	if a, ok := check(
		positive("user_id", req.UserID), positive("amount", req.Amount), currency(req.Currency), text("source", req.Source),
	); !ok {
		return a, false
	}
	got, err := s.store.Charge(ctx, firstCharge(key, req))
	if err != nil {
		return s.storeFailed(ctx, err), false
	}
	return chargeAnswer(req, got), true
}

func (s *Simulator) refund(ctx context.Context, key string, body []byte) (answer, bool) {
	var req provider.RefundRequest
	if a, ok := decode(body, &req); !ok {
		return a, false
	}
	if !validKey(req.ChargeKey) {
		return refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "charge_key must be 1–255 printable ASCII characters without spaces"), false
	}
	got, err := s.store.Refund(ctx, req.ChargeKey, key, newID("void_"))
	if err != nil {
		return s.storeFailed(ctx, err), false
	}
	return refundAnswer(req.ChargeKey, got), true
}

func (s *Simulator) placeOrder(ctx context.Context, key string, body []byte) (answer, bool) {
	var req provider.OrderRequest
	if a, ok := decode(body, &req); !ok {
		return a, false
	}
	if a, ok := check(text("merchant", req.Merchant), text("reference", req.Reference), positive("amount", req.Amount), currency(req.Currency)); !ok {
		return a, false
	}
	got, err := s.store.PlaceOrder(ctx, firstOrder(key, req), FlakyFailures)
	if err != nil {
		return s.storeFailed(ctx, err), false
	}
	return orderAnswer(req, got), true
}

func (s *Simulator) cancelOrder(ctx context.Context, key string, body []byte) (answer, bool) {
	var req provider.CancellationRequest
	if a, ok := decode(body, &req); !ok {
		return a, false
	}
	if !validKey(req.OrderKey) {
		return refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "order_key must be 1–255 printable ASCII characters without spaces"), false
	}
	got, err := s.store.CancelOrder(ctx, req.OrderKey, key, newID("void_"))
	if err != nil {
		return s.storeFailed(ctx, err), false
	}
	return cancelAnswer(req.OrderKey, key, got), true
}

func (s *Simulator) payout(ctx context.Context, key string, body []byte) (answer, bool) {
	var req provider.PayoutRequest
	if a, ok := decode(body, &req); !ok {
		return a, false
	}
	if a, ok := check(
		positive("user_id", req.UserID), positive("amount", req.Amount), currency(req.Currency), text("destination", req.Destination),
	); !ok {
		return a, false
	}
	got, err := s.store.Payout(ctx, firstPayout(key, req), FlakyFailures)
	if err != nil {
		return s.storeFailed(ctx, err), false
	}
	return payoutAnswer(req, got), true
}

func (s *Simulator) cancelPayout(ctx context.Context, key string, body []byte) (answer, bool) {
	var req provider.PayoutCancellationRequest
	if a, ok := decode(body, &req); !ok {
		return a, false
	}
	if !validKey(req.PayoutKey) {
		return refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "payout_key must be 1–255 printable ASCII characters without spaces"), false
	}
	got, err := s.store.CancelPayout(ctx, req.PayoutKey, key, newID("void_"))
	if err != nil {
		return s.storeFailed(ctx, err), false
	}
	return cancelPayoutAnswer(req.PayoutKey, key, got), true
}

// storeFailed is the answer when the store failed: retryable, as nobody knows whether the
// statement took effect.
func (s *Simulator) storeFailed(ctx context.Context, err error) answer {
	s.opts.Logger.ErrorContext(ctx, "providersim: store", "err", err)
	return refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "the simulator's store failed")
}

// OutageRequest is the body of POST /sim/outages.
type OutageRequest struct {
	Target   string `json:"target"`   // gateway or merchant
	Mode     string `json:"mode"`     // fail or timeout
	Duration string `json:"duration"` // a Go duration ("60s"); "0s" ends the outage
}

func (s *Simulator) outage(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err != nil {
		writeJSON(w, refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "body: %v", err))
		return
	}
	var req OutageRequest
	if a, ok := decode(body, &req); !ok {
		writeJSON(w, a)
		return
	}
	d, err := time.ParseDuration(req.Duration)
	if err != nil {
		writeJSON(w, refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "duration %q is not a duration (60s, 1m30s, 0s)", req.Duration))
		return
	}
	if err := s.SetOutage(req.Target, req.Mode, d); err != nil {
		writeJSON(w, refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "%v", err))
		return
	}
	writeJSON(w, answer{http.StatusOK, req})
}

// decode decodes one JSON object with only known fields into v.
func decode(body []byte, v any) (answer, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "body is not the documented JSON: %v", err), false
	}
	if dec.More() {
		return refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "body holds more than one JSON value"), false
	}
	return answer{}, true
}

// check returns the first problem found as a 400.
func check(problems ...string) (answer, bool) {
	for _, p := range problems {
		if p != "" {
			return refusal(http.StatusBadRequest, provider.CodeInvalidRequest, "%s", p), false
		}
	}
	return answer{}, true
}

func positive(field string, v int64) string {
	if v < 1 {
		return fmt.Sprintf("%s must be a positive integer, got %d", field, v)
	}
	return ""
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

func currency(v string) string {
	if !currencyRE.MatchString(v) {
		return fmt.Sprintf("currency must be three capital letters, got %q", v)
	}
	return ""
}

func text(field, v string) string {
	if n := utf8.RuneCountInString(v); n < 1 || n > 256 || !utf8.ValidString(v) {
		return fmt.Sprintf("%s must be 1–256 characters", field)
	}
	return ""
}

// validKey reports whether k is an idempotency key as documented: 1–255 printable ASCII
// characters, no spaces.
func validKey(k string) bool {
	return len(k) >= 1 && len(k) <= 255 && strings.IndexFunc(k, func(r rune) bool { return r < '!' || r > '~' }) < 0
}

func writeJSON(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.body)
}

// loseResponse closes the connection without answering: the work is done and the caller
// never hears of it, as when a response is lost on the way.
func loseResponse(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	conn, _, err := rc.Hijack()
	if err != nil {
		writeJSON(w, refusal(http.StatusServiceUnavailable, provider.CodeUnavailable, "simulated lost response"))
		return
	}
	_ = conn.Close()
}
