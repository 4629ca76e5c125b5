package wallet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

// SimOptions shape a simulator's behaviour for demos and load tests.
type SimOptions struct {
	// Latency is added to every call (respecting the context).
	Latency time.Duration
	// FailureRate (0–1) is the share of calls that fail with a retryable error. Half of those
	// fail before doing anything, half after (the response is "lost"), so retries exercise
	// the idempotency of the key.
	FailureRate float64
}

// The deterministic hooks of the simulators.
const (
	// RejectPrefix: a merchant reference starting with it is rejected for good.
	RejectPrefix = "reject-"
	// FlakyPrefix: a merchant reference starting with it fails twice per idempotency key
	// (retryably), then succeeds.
	FlakyPrefix = "flaky-"
	// flakyFailures is how many attempts per key a flaky- order fails.
	flakyFailures = 2
)

// SimGateway is a payment gateway simulator whose charges live in Postgres (sim_charges),
// one per idempotency key, so that a crash test can prove a charge happened once. The source
// DeclinedSource is always declined.
type SimGateway struct {
	pool *pgxpool.Pool
	opts SimOptions
}

// NewSimGateway returns a simulated gateway on pool.
func NewSimGateway(pool *pgxpool.Pool, opts SimOptions) *SimGateway {
	return &SimGateway{pool: pool, opts: opts}
}

// Charge implements PaymentGateway.
func (g *SimGateway) Charge(ctx context.Context, key string, userID int64, amount Money, currency, source string) (string, error) {
	before, after, err := simulate(ctx, g.opts)
	if err != nil {
		return "", err
	}
	if before {
		return "", RetryableError("unavailable", errors.New("simulated gateway outage"))
	}
	status := "charged"
	if source == DeclinedSource {
		status = "declined"
	}
	var (
		outage              *string
		chargeID, gotStatus *string
		gotUser             *int64
		gotAmount           *Money
		voidedBy            *string
	)
	err = g.pool.QueryRow(ctx, `
WITH o AS (
    SELECT mode FROM sim_outages WHERE target = 'gateway' AND until > now()
), c AS (
    INSERT INTO sim_charges (key, charge_id, user_id, amount, currency, source, status)
    SELECT $1, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM o)
    ON CONFLICT (key) DO UPDATE SET attempts = sim_charges.attempts + 1
    RETURNING charge_id, status, user_id, amount, CASE WHEN charge_id LIKE 'void\_%' THEN refund_key END AS voided_by
)
SELECT (SELECT mode FROM o), c.charge_id, c.status, c.user_id, c.amount, c.voided_by FROM (SELECT 1) one LEFT JOIN c ON true`,
		key, "ch_"+randomID(), userID, int64(amount), currency, source, status,
	).Scan(&outage, &chargeID, &gotStatus, &gotUser, &gotAmount, &voidedBy)
	if err != nil {
		return "", RetryableError("unavailable", fmt.Errorf("sim gateway: %w", err))
	}
	if outage != nil {
		return "", simulatedOutage(ctx, "gateway", *outage)
	}
	switch {
	case voidedBy != nil:
		return "", PermanentError("declined", fmt.Errorf("charge key %q was voided by refund %q", key, *voidedBy))
	case *gotUser != userID || *gotAmount != amount:
		return "", PermanentError("idempotency_mismatch", fmt.Errorf("key %q was used for another charge", key))
	case *gotStatus == "declined":
		return "", PermanentError("declined", fmt.Errorf("payment source %q declined", source))
	case after:
		return "", RetryableError("unavailable", errors.New("simulated lost response after charging"))
	}
	return *chargeID, nil
}

// RefundByKey implements PaymentGateway. A key with no charge is voided with a row of its
// own (status declined, charge id "void_…", refund_key set), which a late Charge meets.
func (g *SimGateway) RefundByKey(ctx context.Context, key, chargeKey string) error {
	before, after, err := simulate(ctx, g.opts)
	if err != nil {
		return err
	}
	if before {
		return RetryableError("unavailable", errors.New("simulated gateway outage"))
	}
	var outage *string
	err = g.pool.QueryRow(ctx, `
WITH o AS (
    SELECT mode FROM sim_outages WHERE target = 'gateway' AND until > now()
), r AS (
    INSERT INTO sim_charges (key, charge_id, user_id, amount, currency, source, status, refund_key, refunded_at)
    SELECT $1, $2, 0, 0, '', '', 'declined', $3, now() WHERE NOT EXISTS (SELECT 1 FROM o)
    ON CONFLICT (key) DO UPDATE SET
        status = CASE WHEN sim_charges.status = 'charged' THEN 'refunded' ELSE sim_charges.status END,
        refund_key = CASE WHEN sim_charges.status = 'charged' THEN $3 ELSE sim_charges.refund_key END,
        refunded_at = CASE WHEN sim_charges.status = 'charged' THEN now() ELSE sim_charges.refunded_at END
)
SELECT mode FROM o`,
		chargeKey, "void_"+randomID(), key).Scan(&outage)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return RetryableError("unavailable", fmt.Errorf("sim gateway: %w", err))
	default:
		return simulatedOutage(ctx, "gateway", *outage)
	}
	if after {
		return RetryableError("unavailable", errors.New("simulated lost response after refunding"))
	}
	return nil
}

// SimMerchant is a merchant simulator whose orders live in Postgres (sim_orders), one per
// idempotency key. References starting with RejectPrefix are rejected; with FlakyPrefix
// they fail twice per key, then succeed.
type SimMerchant struct {
	pool *pgxpool.Pool
	opts SimOptions
}

// NewSimMerchant returns a simulated merchant on pool.
func NewSimMerchant(pool *pgxpool.Pool, opts SimOptions) *SimMerchant {
	return &SimMerchant{pool: pool, opts: opts}
}

// PlaceOrder implements Merchant.
func (m *SimMerchant) PlaceOrder(ctx context.Context, key, merchant, reference string, amount Money, currency string) (string, error) {
	before, after, err := simulate(ctx, m.opts)
	if err != nil {
		return "", err
	}
	if before {
		return "", RetryableError("unavailable", errors.New("simulated merchant outage"))
	}
	// The first attempt decides from the reference; a repeated one counts itself and moves
	// a flaky order on once it has failed often enough. Everything else is as first decided.
	first := "placed"
	switch {
	case strings.HasPrefix(reference, RejectPrefix):
		first = "rejected"
	case strings.HasPrefix(reference, FlakyPrefix):
		first = "pending"
	}
	var (
		outage, orderID, status, gotReference *string
		attempts                              *int
		gotAmount                             *Money
	)
	err = m.pool.QueryRow(ctx, `
WITH o AS (
    SELECT mode FROM sim_outages WHERE target = 'merchant' AND until > now()
), p AS (
    INSERT INTO sim_orders (key, order_id, merchant, reference, amount, currency, status)
    SELECT $1, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM o)
    ON CONFLICT (key) DO UPDATE SET
        attempts = sim_orders.attempts + 1,
        status = CASE WHEN sim_orders.status = 'pending' AND sim_orders.attempts + 1 > $8 THEN 'placed'
                      ELSE sim_orders.status END
    RETURNING order_id, status, attempts, amount, reference
)
SELECT (SELECT mode FROM o), p.order_id, p.status, p.attempts, p.amount, p.reference FROM (SELECT 1) one LEFT JOIN p ON true`,
		key, "ord_"+randomID(), merchant, reference, int64(amount), currency, first, flakyFailures,
	).Scan(&outage, &orderID, &status, &attempts, &gotAmount, &gotReference)
	if err != nil {
		return "", RetryableError("unavailable", fmt.Errorf("sim merchant: %w", err))
	}
	if outage != nil {
		return "", simulatedOutage(ctx, "merchant", *outage)
	}
	switch {
	case *gotReference == cancelledBeforePlaced:
		return "", PermanentError("rejected", fmt.Errorf("order key %q was cancelled", key))
	case *gotAmount != amount:
		return "", PermanentError("idempotency_mismatch", fmt.Errorf("key %q was used for another order", key))
	case *status == "rejected":
		return "", PermanentError("rejected", fmt.Errorf("merchant %q rejected order %q", merchant, reference))
	case *status == "pending":
		return "", RetryableError("unavailable", fmt.Errorf("merchant %q flaky (attempt %d of order %q)", merchant, *attempts, reference))
	case after:
		return "", RetryableError("unavailable", errors.New("simulated lost response after placing the order"))
	}
	return *orderID, nil
}

// cancelledBeforePlaced is the reference of the row that CancelOrder leaves for a key with
// no order: the schema has no "cancelled" status, so the row is "rejected" with this mark.
const cancelledBeforePlaced = "(cancelled before placed)"

// CancelOrder implements Merchant. The simulator cancels what it has not placed yet (no
// order, or a pending flaky- one, both become rejected); a placed order it cannot cancel,
// as its schema has no cancelled status, so it answers CodeNotCancellable.
func (m *SimMerchant) CancelOrder(ctx context.Context, key, orderKey string) error {
	before, after, err := simulate(ctx, m.opts)
	if err != nil {
		return err
	}
	if before {
		return RetryableError("unavailable", errors.New("simulated merchant outage"))
	}
	var outage, status *string
	err = m.pool.QueryRow(ctx, `
WITH o AS (
    SELECT mode FROM sim_outages WHERE target = 'merchant' AND until > now()
), c AS (
    INSERT INTO sim_orders (key, order_id, merchant, reference, amount, currency, status)
    SELECT $1, $2, '', $3, 0, '', 'rejected' WHERE NOT EXISTS (SELECT 1 FROM o)
    ON CONFLICT (key) DO UPDATE SET
        status = CASE WHEN sim_orders.status = 'pending' THEN 'rejected' ELSE sim_orders.status END
    RETURNING status
)
SELECT (SELECT mode FROM o), c.status FROM (SELECT 1) one LEFT JOIN c ON true`, orderKey, "ord_"+randomID(), cancelledBeforePlaced).Scan(&outage, &status)
	if err != nil {
		return RetryableError("unavailable", fmt.Errorf("sim merchant: %w", err))
	}
	if outage != nil {
		return simulatedOutage(ctx, "merchant", *outage)
	}
	if *status == "placed" {
		return PermanentError(CodeNotCancellable, fmt.Errorf("order key %q: the order is placed (cancel %q)", orderKey, key))
	}
	if after {
		return RetryableError("unavailable", errors.New("simulated lost response after cancelling"))
	}
	return nil
}

// The simulators' outage modes (SetOutage).
const (
	// OutageFail: every call fails at once with a retryable error, having done nothing.
	OutageFail = "fail"
	// OutageTimeout: every call hangs until its caller gives up (its context's deadline).
	OutageTimeout = "timeout"
)

// The simulators an outage can hit.
const (
	SimGatewayTarget  = "gateway"
	SimMerchantTarget = "merchant"
)

// SetSimOutage switches on an outage of a simulator (SimGatewayTarget or
// SimMerchantTarget) for d, in every process sharing the database behind pool: each call
// fails at once (mode OutageFail) or hangs until its caller's deadline (OutageTimeout),
// having done nothing. d = 0 ends an outage now. It is for tests, the demo and make chaos.
func SetSimOutage(ctx context.Context, pool *pgxpool.Pool, target, mode string, d time.Duration) error {
	if target != SimGatewayTarget && target != SimMerchantTarget {
		return apperr.New(apperr.Invalid, "outage target must be %q or %q, got %q", SimGatewayTarget, SimMerchantTarget, target)
	}
	if mode != OutageFail && mode != OutageTimeout {
		return apperr.New(apperr.Invalid, "outage mode must be %q or %q, got %q", OutageFail, OutageTimeout, mode)
	}
	if d < 0 {
		return apperr.New(apperr.Invalid, "outage duration must not be negative, got %s", d)
	}
	_, err := pool.Exec(ctx, `
INSERT INTO sim_outages (target, mode, until) VALUES ($1, $2, now() + make_interval(secs => $3))
ON CONFLICT (target) DO UPDATE SET mode = EXCLUDED.mode, until = EXCLUDED.until`, target, mode, d.Seconds())
	if err != nil {
		return fmt.Errorf("wallet: sim outage: %w", err)
	}
	return nil
}

// simulatedOutage is what a call during an outage of target gets.
func simulatedOutage(ctx context.Context, target, mode string) error {
	if mode == OutageTimeout {
		<-ctx.Done()
		return RetryableError("timeout", fmt.Errorf("simulated %s outage: no answer: %w", target, ctx.Err()))
	}
	return RetryableError("unavailable", fmt.Errorf("simulated %s outage", target))
}

// simulate waits the configured latency and draws this call's injected failure: before
// (nothing done) or after (done, response lost). It returns ctx's error if ctx ends first.
func simulate(ctx context.Context, o SimOptions) (before, after bool, err error) {
	if o.Latency > 0 {
		t := time.NewTimer(o.Latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false, false, RetryableError("timeout", ctx.Err())
		case <-t.C:
		}
	}
	if o.FailureRate > 0 && mrand.Float64() < o.FailureRate {
		if mrand.IntN(2) == 0 {
			return true, false, nil
		}
		return false, true, nil
	}
	return false, false, nil
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
