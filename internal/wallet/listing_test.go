package wallet_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// pageIDs lists every page of f (following next_cursor) and returns the saga ids in order,
// with each page's length.
func pageIDs(t *testing.T, list func(f wallet.SagaFilter) (wallet.SagaPage, error), f wallet.SagaFilter) (ids []int64, pages []int) {
	t.Helper()
	for range 100 {
		page, err := list(f)
		require.NoError(t, err)
		for _, op := range page.Items {
			require.Empty(t, op.Steps, "list pages carry no step history")
			require.False(t, op.CreatedAt.IsZero())
			if f.State != "" {
				require.Equal(t, f.State, op.State)
			}
			ids = append(ids, op.ID)
		}
		pages = append(pages, len(page.Items))
		if page.NextCursor == 0 {
			return ids, pages
		}
		f.Cursor = page.NextCursor
	}
	t.Fatal("more than 100 pages")
	return nil, nil
}

// The wallet lists its sagas with their states from the engine: newest first, filtered by
// user and state, a page at a time, whatever the chunks in which it reads a user's
// operations; a saga of the engine that has no wallet operation is not the wallet's.
func TestListSagasJoinsTheEnginesStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u, v := e.user(t), e.user(t)
	var all, uFailed, failed []int64
	run := func(op wallet.Operation, err error) wallet.Operation {
		t.Helper()
		require.NoError(t, err)
		op = e.wait(t, op.ID)
		all = append(all, op.ID)
		return op
	}
	run(e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 1000}))
	run(e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: v, Amount: 1000}))
	op := run(e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 5000, Merchant: "m", Reference: "r"}))
	require.Equal(t, saga.Failed, op.State, "insufficient funds")
	uFailed = append(uFailed, op.ID)
	run(e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 100, Merchant: "m", Reference: "reject-1"}))
	op = run(e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: v, Amount: 100, Source: providersim.DeclinedSource}))
	require.Equal(t, saga.Failed, op.State)
	failed = append(failed, op.ID)
	run(e.svc.Transfer(e.ctx, wallet.TransferRequest{From: v, To: u, Amount: 1}))
	op = run(e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 1, Source: providersim.DeclinedSource}))
	uFailed = append(uFailed, op.ID)
	run(e.svc.Transfer(e.ctx, wallet.TransferRequest{From: u, To: v, Amount: 1}))
	// A saga of a wallet kind started on the engine alone: no operation row, not listed.
	stranger := e.startDirect(t, wallet.KindTransfer, map[string]any{"from": u, "to": v, "amount": 1, "currency": "CNY"})
	failed = append(failed, uFailed...)
	slices.Reverse(all)
	slices.Sort(failed)
	slices.Reverse(failed)
	slices.Reverse(uFailed)

	list := func(f wallet.SagaFilter) (wallet.SagaPage, error) { return e.svc.ListSagas(e.ctx, f) }
	ids, pages := pageIDs(t, list, wallet.SagaFilter{Limit: 3})
	require.Equal(t, all, ids, "every saga, newest first")
	require.NotContains(t, ids, stranger.ID)
	require.Equal(t, 3, pages[0])
	ids, _ = pageIDs(t, list, wallet.SagaFilter{State: saga.Failed, Limit: 1})
	require.Equal(t, failed, ids)

	var uAll []int64
	for _, id := range all {
		got, err := e.svc.GetSaga(e.ctx, id)
		require.NoError(t, err)
		if got.UserID == u || got.CounterpartyID == u {
			uAll = append(uAll, id)
		}
	}
	require.Len(t, uAll, 6)
	for _, chunk := range []int{1, 2, 3, 200} {
		chunked := func(f wallet.SagaFilter) (wallet.SagaPage, error) {
			return e.svc.ListUserSagasInChunks(e.ctx, f, chunk)
		}
		ids, _ := pageIDs(t, chunked, wallet.SagaFilter{UserID: u, Limit: 2})
		require.Equal(t, uAll, ids, "chunks of %d", chunk)
		ids, pages := pageIDs(t, chunked, wallet.SagaFilter{UserID: u, State: saga.Failed, Limit: 1})
		require.Equal(t, uFailed, ids, "chunks of %d", chunk)
		require.Equal(t, []int{1, 1}, pages, "chunks of %d", chunk)
	}
	ids, _ = pageIDs(t, list, wallet.SagaFilter{UserID: u, State: saga.Compensated})
	require.Len(t, ids, 1)
}

// sagaTables are the saga engine's tables: only internal/saga's SQL names them.
var sagaTables = regexp.MustCompile(`(?i)\b(from|join|into|update|table)\s+sagas\b`)

// The wallet reads saga state through the engine's API, never from the engine's tables: none
// of the package's statements (sql/*.sql) and no string in its code names them after FROM,
// JOIN, INTO, UPDATE or TABLE.
func TestTheWalletNeverReadsTheEnginesTables(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			require.Falsef(t, sagaTables.MatchString(s), "%s: SQL on the saga engine's tables: %q", fset.Position(lit.Pos()), sagaTables.FindString(s))
			return true
		})
	}
	require.Positive(t, checked)
	statements, err := filepath.Glob("sql/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, statements)
	for _, name := range statements {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		require.Falsef(t, sagaTables.Match(b), "%s: SQL on the saga engine's tables: %q", name, sagaTables.Find(b))
	}
	require.True(t, sagaTables.MatchString("SELECT s.state FROM wallet_operations o JOIN sagas s ON s.id = o.saga_id"), "the check finds the old join")
}
