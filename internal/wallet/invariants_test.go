package wallet_test

// The invariants named by number here are those listed in docs/ARCHITECTURE.md.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// apply runs one ApplyChange in a transaction of its own and commits it if it succeeded.
func (e *env) apply(ctx context.Context, c wallet.Change) (wallet.Applied, error) {
	var res wallet.Applied
	err := pg.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		res, err = wallet.ApplyChange(ctx, tx, c)
		return err
	})
	return res, err
}

// sagaID starts a deposit saga that nobody drives (its first commit only), to own ledger
// rows in tests of the balance primitive.
func (e *env) sagaID(t *testing.T, user int64) int64 {
	t.Helper()
	st, err := e.eng.Start(e.ctx, wallet.KindDeposit, map[string]any{"user_id": user, "amount": 1, "currency": "CNY", "source": "card"}, nil)
	require.NoError(t, err)
	return st.ID()
}

// startDirect starts a saga of kind with input through the engine alone, past the request
// checks of the service, and drives it inline, then lets recovery finish it.
func (e *env) startDirect(t *testing.T, kind string, input any) saga.Snapshot {
	t.Helper()
	st, err := e.eng.Start(e.ctx, kind, input, nil)
	require.NoError(t, err)
	_, err = e.eng.Drive(e.ctx, st)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	s, err := e.eng.Wait(ctx, st.ID())
	require.NoError(t, err)
	return s
}

// Invariant 2: the balance column's rule (wallets_balance_check, on its domain) refuses a
// negative balance even to raw SQL.
func TestBalanceNeverNegativeConstraint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	u := e.user(t)
	_, err := e.pool.Exec(e.ctx, `UPDATE wallets SET balance = -1 WHERE user_id = $1`, u)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "got %v", err)
	require.Equal(t, pgerrcode.CheckViolation, pgErr.Code)
}

// Invariant 2 (conditional update): a debit beyond the balance fails and changes nothing.
func TestApplyChangeInsufficientFunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	u := e.user(t)
	id := e.sagaID(t, u)
	_, err := e.apply(e.ctx, wallet.Change{UserID: u, SagaID: id, Step: "credit", Amount: 100, Kind: walletevent.Deposit})
	require.NoError(t, err)
	_, err = e.apply(e.ctx, wallet.Change{UserID: u, SagaID: id, Step: "debit", Amount: -101, Kind: walletevent.Purchase})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	require.Equal(t, wallet.Money(100), e.balance(t, u))
	e.checkInvariants(t, u)
}

// Invariant 3: the same local step applied twice changes the balance once, even when the
// replay comes after the balance moved on (a debit replayed on an empty wallet).
func TestApplyChangeExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	u := e.user(t)
	id := e.sagaID(t, u)
	credit := wallet.Change{UserID: u, SagaID: id, Step: "credit", Amount: 100, Kind: walletevent.Deposit}
	res, err := e.apply(e.ctx, credit)
	require.NoError(t, err)
	require.True(t, res.Applied)
	require.Equal(t, int64(1), res.Seq)
	require.Equal(t, wallet.Money(100), res.BalanceAfter)

	res, err = e.apply(e.ctx, credit)
	require.NoError(t, err)
	require.False(t, res.Applied)

	debit := wallet.Change{UserID: u, SagaID: id, Step: "debit", Amount: -100, Kind: walletevent.Purchase}
	res, err = e.apply(e.ctx, debit)
	require.NoError(t, err)
	require.True(t, res.Applied)
	res, err = e.apply(e.ctx, debit)
	require.NoError(t, err, "a replayed debit is not insufficient funds")
	require.False(t, res.Applied)

	var ledger int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM ledger_entries WHERE saga_id = $1`, id).Scan(&ledger))
	require.Equal(t, 2, ledger)
	require.Equal(t, wallet.Money(0), e.balance(t, u))
	e.checkInvariants(t, u)

	// The ledger's UNIQUE constraint is the backstop behind the check.
	_, err = e.pool.Exec(e.ctx, `INSERT INTO ledger_entries (user_id, saga_id, step, amount, balance_after) VALUES ($1, $2, 'credit', 100, 100)`, u, id)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, pgerrcode.UniqueViolation, pgErr.Code)
}

// Invariant 4: concurrent changes of one wallet get seqs 1..n without gaps, and the
// balance is the sum of the ledger.
func TestSeqGapFreeUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	u := e.user(t)
	id := e.sagaID(t, u)
	const workers, each = 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				amount := wallet.Money(100)
				kind := walletevent.Deposit
				if i%2 == 1 {
					amount, kind = -30, walletevent.Purchase
				}
				_, err := e.apply(e.ctx, wallet.Change{UserID: u, SagaID: id, Step: fmt.Sprintf("w%d-%d", w, i), Amount: amount, Kind: kind})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, wallet.Money(workers*(3*100-2*30)), e.balance(t, u))
	e.checkInvariants(t, u)
	w, err := e.svc.GetWallet(e.ctx, u)
	require.NoError(t, err)
	require.Equal(t, int64(workers*each), w.LastSeq)
}

// 20 concurrent deposits through the engine: one event each, seqs 1..20.
func TestConcurrentDepositsSeq(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	var ids []int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 100})
			if err == nil {
				mu.Lock()
				ids = append(ids, op.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, ids, 20)
	e.waitTerminal(t, ids)
	require.Equal(t, wallet.Money(2000), e.balance(t, u))
	e.checkInvariants(t, u)
}

// 100 concurrent purchases of 50 against 2,500: exactly 50 complete, 50 fail for
// insufficient funds, the balance ends at 0 and never went negative.
func TestConcurrentPurchasesExhaustBalance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 2500)
	ids := make([]int64, 100)
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range 100 {
		wg.Go(func() {
			op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 50, Merchant: "shop", Reference: fmt.Sprintf("p-%d", i)})
			ids[i], errs[i] = op.ID, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	e.waitTerminal(t, ids)
	counts := map[string]int{}
	rows, err := e.pool.Query(e.ctx, `SELECT state, COALESCE(error_code, '') FROM sagas WHERE id = ANY($1)`, ids)
	require.NoError(t, err)
	for rows.Next() {
		var state, code string
		require.NoError(t, rows.Scan(&state, &code))
		counts[state+"/"+code]++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"completed/": 50, "failed/" + wallet.CodeInsufficientFunds: 50}, counts)
	require.Equal(t, wallet.Money(0), e.balance(t, u))
	var minAfter int64
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT min(balance_after) FROM wallet_events WHERE user_id = $1`, u).Scan(&minAfter))
	require.GreaterOrEqual(t, minAfter, int64(0))
	e.checkInvariants(t, u)
}

// Random deposits, purchases (some rejected) and transfers among four users: afterwards
// every wallet satisfies the invariants and money is conserved.
func TestRandomOperationsKeepInvariants(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	users := []int64{e.user(t), e.user(t), e.user(t), e.user(t)}
	for _, u := range users {
		e.fund(t, u, 5000)
	}
	var ids []int64
	for i := range 60 {
		u := users[rng.IntN(len(users))]
		amount := wallet.Money(1 + rng.IntN(3000))
		var op wallet.Operation
		var err error
		switch rng.IntN(4) {
		case 0:
			op, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: amount})
		case 1:
			ref := fmt.Sprintf("r-%d", i)
			if rng.IntN(3) == 0 {
				ref = "reject-" + ref
			}
			op, err = e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: amount, Merchant: "m", Reference: ref})
		default:
			to := users[rng.IntN(len(users))]
			for to == u {
				to = users[rng.IntN(len(users))]
			}
			op, err = e.svc.Transfer(e.ctx, wallet.TransferRequest{From: u, To: to, Amount: amount})
		}
		require.NoError(t, err)
		ids = append(ids, op.ID)
	}
	e.waitTerminal(t, ids)
	var stuck int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM sagas WHERE state NOT IN ('completed', 'compensated', 'failed')`).Scan(&stuck))
	require.Zero(t, stuck)
	for _, u := range users {
		e.checkInvariants(t, u)
	}
	// Conservation: the total equals completed deposits minus completed purchases.
	var total, deposited, spent int64
	require.NoError(t, e.pool.QueryRow(e.ctx, `
SELECT (SELECT sum(balance) FROM wallets),
       (SELECT COALESCE(sum(o.amount), 0) FROM wallet_operations o JOIN sagas s ON s.id = o.saga_id WHERE o.kind = 'deposit' AND s.state = 'completed'),
       (SELECT COALESCE(sum(o.amount), 0) FROM wallet_operations o JOIN sagas s ON s.id = o.saga_id WHERE o.kind = 'purchase' AND s.state = 'completed')`).
		Scan(&total, &deposited, &spent))
	require.Equal(t, deposited-spent, total)
}
