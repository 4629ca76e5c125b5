package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeQueryCollapsesWhitespaceAndDropsTheProbeMark(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"SELECT  a\n\t FROM t\n WHERE id = $1 ", "SELECT a FROM t WHERE id = $1"},
		{probe + "SELECT count(*)\n FROM x", "SELECT count(*) FROM x"},
		{"COMMIT", "COMMIT"},
		{"SELECT a -- the a of t\n FROM t /* one\nrow */ WHERE b", "SELECT a FROM t WHERE b"},
	} {
		require.Equal(t, c.want, normalizeQuery(c.in), c.in)
	}
}

func TestPerSagaLeavesProbesOutAndSharesTheProductsTime(t *testing.T) {
	t.Parallel()
	st := &Statements{List: []Statement{
		{Query: "UPDATE wallets SET balance = balance + $1", Calls: 200, ExecMS: 60},
		{Query: "SELECT count(*) FROM wallet_events", Calls: 10, ExecMS: 50, Probe: true},
		{Query: "COMMIT", Calls: 200, ExecMS: 40},
	}}
	list, total := st.perSaga(100)
	require.Len(t, list, 2)
	require.InDelta(t, 1.0, total, 1e-9) // (60 + 40) ms over 100 sagas
	require.Equal(t, "UPDATE wallets SET balance = balance + $1", list[0].Query)
	require.InDelta(t, 2.0, list[0].CallsPerSaga, 1e-9)
	require.InDelta(t, 0.6, list[0].MSPerSaga, 1e-9)
	require.InDelta(t, 0.6, list[0].Share, 1e-9)
	require.InDelta(t, 0.4, list[1].Share, 1e-9)

	list, total = st.perSaga(0)
	require.Empty(t, list)
	require.Zero(t, total)
}

func TestVerdictNamesTheCostliestProductStatement(t *testing.T) {
	t.Parallel()
	st := &Statements{List: []Statement{
		{Query: "SELECT probe", Calls: 5, ExecMS: 500, Probe: true},
		{Query: "INSERT INTO ledger_entries VALUES ($1)", Calls: 100, ExecMS: 30},
		{Query: "COMMIT", Calls: 100, ExecMS: 10},
	}}
	v := st.verdict(100)
	require.Contains(t, v, "costliest statement: INSERT INTO ledger_entries VALUES ($1) [ledger_entries] — 0.300 ms/saga, 75% of the 0.400 ms/saga the database spent executing statements")
	require.Contains(t, v, "1.00 calls/saga, 300.0 µs/call")
	require.NotContains(t, v, "evicted")

	st.Evicted = 3
	require.Contains(t, st.verdict(100), "evicted 3 entries")
	require.Equal(t, "no statement profile", (*Statements)(nil).verdict(100))
}

func TestStatementTablesShowTheTopAndSumTheRest(t *testing.T) {
	t.Parallel()
	st := &Statements{}
	for i := range topStatements + 2 {
		st.List = append(st.List, Statement{Query: "SELECT " + string(rune('a'+i)) + " || 'x'", Calls: 10, ExecMS: float64(100 - i)})
	}
	ts := statementTables([]profiled{{label: "deposit × 8", completed: 10, st: st}})
	require.Len(t, ts, 2)
	require.Len(t, ts[0].rows, topStatements+1)
	require.Equal(t, "the 2 others", ts[0].rows[topStatements][6])
	require.Equal(t, []string{`SELECT a \|\| 'x'`}, mdCells([]string{"SELECT a || 'x'"}))
	require.Len(t, ts[1].rows, 1)
	require.Contains(t, ts[1].rows[0][1], "costliest statement: SELECT a || 'x'")
}

func TestTablesOfNamesTablesButNotCTEsOrFunctions(t *testing.T) {
	t.Parallel()
	q := "WITH w AS ( UPDATE wallets SET balance = balance + $4 WHERE user_id = $1 RETURNING * ), l AS MATERIALIZED ( INSERT INTO ledger_entries SELECT * FROM w ) " +
		"INSERT INTO wallet_events (user_id) SELECT user_id FROM w JOIN notify.progress p ON true, unnest($2::bigint[]) FROM unnest($3::text[])"
	require.Equal(t, []string{"wallets", "ledger_entries", "wallet_events", "notify.progress"}, tablesOf(q))
	require.Empty(t, tablesOf("COMMIT"))
	require.Equal(t, []string{"trans_branch_op"}, tablesOf(`INSERT INTO "trans_branch_op" ("gid") VALUES ($1) ON CONFLICT ("gid") DO UPDATE SET "status"=excluded."status"`))
	require.Equal(t, []string{"public.kv"}, tablesOf(`SELECT * FROM "public"."kv"`))
	require.Equal(t, []string{"wallet_events", "notify.sms_log"}, tablesOf(
		`SELECT extract(epoch FROM l.sent_at - e.occurred_at), extract($3 FROM l.x), a IS DISTINCT FROM b FROM wallet_events e JOIN notify.sms_log l ON true`))
	require.Equal(t, []string{"sagas"}, tablesOf(`SELECT id FROM sagas WHERE true FOR UPDATE SKIP LOCKED`))
	require.Equal(t, "SELECT a FR… [t]", describe("SELECT a FROM t", 12))
}
