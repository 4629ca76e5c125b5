package wallet_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// rowCounter is a pgx query tracer that counts the rows the database returns to SELECTs: the
// rows a request made Postgres read and send, whatever the code that asked.
type rowCounter struct{ rows atomic.Int64 }

func (c *rowCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c *rowCounter) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if d.Err == nil && d.CommandTag.Select() {
		c.rows.Add(d.CommandTag.RowsAffected())
	}
}

// countedEnv is a wallet service (without recovery) on a fresh database whose pool counts
// the rows its SELECTs return; the plain pool is for the test's own statements.
func countedEnv(t *testing.T) (*env, *pgxpool.Pool, *rowCounter) {
	t.Helper()
	plain, url := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	counter := &rowCounter{}
	cfg.ConnConfig.Tracer = counter
	counted, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(counted.Close)
	return newEnvOn(t, counted, envOptions{noRunner: true}), plain, counter
}

// boundedPages follows f's pages to the end (next_cursor absent) and returns the saga ids
// listed, with each page's length: every request reads at most about the budget (the rows
// Postgres returned to it, counted by the tracer: the user's or the engine's rows, those
// rows' counterparts, and the user), never the whole history before the page.
func boundedPages(t *testing.T, e *env, counter *rowCounter, f wallet.SagaFilter) (ids []int64, pages []int) {
	t.Helper()
	// Each read of the user's rows is matched by a read of as many sagas (or the other way
	// round), and the user is read once.
	const perRequest = 2*wallet.ListScanBudget + 1
	list := func(f wallet.SagaFilter) (wallet.SagaPage, error) {
		before := counter.rows.Load()
		page, err := e.svc.ListSagas(e.ctx, f)
		read := counter.rows.Load() - before
		require.LessOrEqual(t, read, int64(perRequest), "one request for %+v read %d rows", f, read)
		return page, err
	}
	return pageIDs(t, list, f)
}

// A user with 5,000 sagas, the oldest the only failed one (half of them transfers the user
// received): asking for its failed sagas reads at most ListScanBudget of its operations per
// request. The first pages are empty but carry next_cursor, and following it reaches the
// failed saga, which no request found by reading the whole history.
func TestAUsersListByStateReadsAtMostTheBudget(t *testing.T) {
	t.Parallel()
	e, plain, counter := countedEnv(t)
	u, v := e.user(t), e.user(t)
	const n = 5000
	var failed int64
	require.NoError(t, plain.QueryRow(e.ctx, `
WITH s AS (INSERT INTO sagas (kind, state) VALUES ('purchase', 'failed') RETURNING id)
INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency, merchant, reference)
SELECT id, 'purchase', $1, 1, 'CNY', 'm', 'r' FROM s RETURNING saga_id`, u).Scan(&failed))
	_, err := plain.Exec(e.ctx, `
WITH s AS (
	INSERT INTO sagas (kind, state)
	SELECT CASE WHEN g % 2 = 0 THEN 'deposit' ELSE 'transfer' END, 'completed' FROM generate_series(2, $3::int) g
	RETURNING id, kind)
INSERT INTO wallet_operations (saga_id, kind, user_id, counterparty_id, amount, currency)
SELECT id, kind, CASE WHEN kind = 'deposit' THEN $1::bigint ELSE $2::bigint END, CASE WHEN kind = 'transfer' THEN $1::bigint END, 1, 'CNY'
FROM s`, u, v, n)
	require.NoError(t, err)
	_, err = plain.Exec(e.ctx, `ANALYZE sagas, wallet_operations`)
	require.NoError(t, err)

	first, err := e.svc.ListSagas(e.ctx, wallet.SagaFilter{UserID: u, State: saga.Failed})
	require.NoError(t, err)
	require.Empty(t, first.Items, "the newest %d of the user's sagas hold no failed one", wallet.ListScanBudget)
	require.NotZero(t, first.NextCursor, "a page cut short by the budget says where to go on")

	ids, pages := boundedPages(t, e, counter, wallet.SagaFilter{UserID: u, State: saga.Failed})
	require.Equal(t, []int64{failed}, ids, "following next_cursor reaches the oldest saga")
	require.LessOrEqual(t, len(pages), n/wallet.ListScanBudget+2, "pages: %v", pages)
	t.Logf("pages of a user's failed sagas among %d: %v", n, pages)

	// Every saga of the user, a page of 100 at a time, as before: full pages.
	ids, pages = boundedPages(t, e, counter, wallet.SagaFilter{UserID: u, Limit: 100})
	require.Len(t, ids, n)
	require.Equal(t, 100, pages[0])
	require.Equal(t, failed, ids[n-1])
}

// The operator's list of every user's sagas skips those without the wallet's row (sagas the
// engine ran for someone else): 3,000 of them, newer than the one failed saga of the
// wallet's, cost a request at most ListScanBudget of the engine's sagas, in a state or in
// any; the first page is empty with next_cursor, and following it reaches the wallet's saga.
func TestTheOperatorsListReadsAtMostTheBudget(t *testing.T) {
	t.Parallel()
	e, plain, counter := countedEnv(t)
	u := e.user(t)
	var failed int64
	require.NoError(t, plain.QueryRow(e.ctx, `
WITH s AS (INSERT INTO sagas (kind, state) VALUES ('deposit', 'failed') RETURNING id)
INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency, source)
SELECT id, 'deposit', $1, 1, 'CNY', 'card' FROM s RETURNING saga_id`, u).Scan(&failed))
	_, err := plain.Exec(e.ctx, `INSERT INTO sagas (kind, state) SELECT 'deposit', 'failed' FROM generate_series(1, 3000)`)
	require.NoError(t, err)
	_, err = plain.Exec(e.ctx, `ANALYZE sagas, wallet_operations`)
	require.NoError(t, err)

	for _, st := range []saga.State{saga.Failed, ""} {
		first, err := e.svc.ListSagas(e.ctx, wallet.SagaFilter{State: st})
		require.NoError(t, err)
		require.Empty(t, first.Items, "state %q: the newest sagas are not the wallet's", st)
		require.NotZero(t, first.NextCursor, "state %q: a page cut short by the budget says where to go on", st)

		ids, pages := boundedPages(t, e, counter, wallet.SagaFilter{State: st})
		require.Equal(t, []int64{failed}, ids, "state %q: following next_cursor reaches the wallet's saga", st)
		require.LessOrEqual(t, len(pages), 3000/wallet.ListScanBudget+2, "state %q: pages %v", st, pages)
		t.Logf("state %q: pages %v", st, pages)
	}
}
