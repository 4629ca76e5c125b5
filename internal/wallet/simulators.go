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

	"github.com/jackc/pgx/v5/pgxpool"
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
		chargeID, gotStatus string
		gotUser             int64
		gotAmount           Money
		voidedBy            *string
	)
	err = g.pool.QueryRow(ctx, `
INSERT INTO sim_charges (key, charge_id, user_id, amount, currency, source, status)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key) DO UPDATE SET attempts = sim_charges.attempts + 1
RETURNING charge_id, status, user_id, amount, CASE WHEN charge_id LIKE 'void\_%' THEN refund_key END`,
		key, "ch_"+randomID(), userID, int64(amount), currency, source, status,
	).Scan(&chargeID, &gotStatus, &gotUser, &gotAmount, &voidedBy)
	if err != nil {
		return "", RetryableError("unavailable", fmt.Errorf("sim gateway: %w", err))
	}
	switch {
	case voidedBy != nil:
		return "", PermanentError("declined", fmt.Errorf("charge key %q was voided by refund %q", key, *voidedBy))
	case gotUser != userID || gotAmount != amount:
		return "", PermanentError("idempotency_mismatch", fmt.Errorf("key %q was used for another charge", key))
	case gotStatus == "declined":
		return "", PermanentError("declined", fmt.Errorf("payment source %q declined", source))
	case after:
		return "", RetryableError("unavailable", errors.New("simulated lost response after charging"))
	}
	return chargeID, nil
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
	_, err = g.pool.Exec(ctx, `
INSERT INTO sim_charges (key, charge_id, user_id, amount, currency, source, status, refund_key, refunded_at)
VALUES ($1, $2, 0, 0, '', '', 'declined', $3, now())
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN sim_charges.status = 'charged' THEN 'refunded' ELSE sim_charges.status END,
    refund_key = CASE WHEN sim_charges.status = 'charged' THEN $3 ELSE sim_charges.refund_key END,
    refunded_at = CASE WHEN sim_charges.status = 'charged' THEN now() ELSE sim_charges.refunded_at END`,
		chargeKey, "void_"+randomID(), key)
	if err != nil {
		return RetryableError("unavailable", fmt.Errorf("sim gateway: %w", err))
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
		orderID, status string
		attempts        int
		gotAmount       Money
	)
	var gotReference string
	err = m.pool.QueryRow(ctx, `
INSERT INTO sim_orders (key, order_id, merchant, reference, amount, currency, status)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key) DO UPDATE SET
    attempts = sim_orders.attempts + 1,
    status = CASE WHEN sim_orders.status = 'pending' AND sim_orders.attempts + 1 > $8 THEN 'placed'
                  ELSE sim_orders.status END
RETURNING order_id, status, attempts, amount, reference`,
		key, "ord_"+randomID(), merchant, reference, int64(amount), currency, first, flakyFailures,
	).Scan(&orderID, &status, &attempts, &gotAmount, &gotReference)
	if err != nil {
		return "", RetryableError("unavailable", fmt.Errorf("sim merchant: %w", err))
	}
	switch {
	case gotReference == cancelledBeforePlaced:
		return "", PermanentError("rejected", fmt.Errorf("order key %q was cancelled", key))
	case gotAmount != amount:
		return "", PermanentError("idempotency_mismatch", fmt.Errorf("key %q was used for another order", key))
	case status == "rejected":
		return "", PermanentError("rejected", fmt.Errorf("merchant %q rejected order %q", merchant, reference))
	case status == "pending":
		return "", RetryableError("unavailable", fmt.Errorf("merchant %q flaky (attempt %d of order %q)", merchant, attempts, reference))
	case after:
		return "", RetryableError("unavailable", errors.New("simulated lost response after placing the order"))
	}
	return orderID, nil
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
	var status string
	err = m.pool.QueryRow(ctx, `
INSERT INTO sim_orders (key, order_id, merchant, reference, amount, currency, status)
VALUES ($1, $2, '', $3, 0, '', 'rejected')
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN sim_orders.status = 'pending' THEN 'rejected' ELSE sim_orders.status END
RETURNING status`, orderKey, "ord_"+randomID(), cancelledBeforePlaced).Scan(&status)
	if err != nil {
		return RetryableError("unavailable", fmt.Errorf("sim merchant: %w", err))
	}
	if status == "placed" {
		return PermanentError(CodeNotCancellable, fmt.Errorf("order key %q: the order is placed (cancel %q)", orderKey, key))
	}
	if after {
		return RetryableError("unavailable", errors.New("simulated lost response after cancelling"))
	}
	return nil
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
