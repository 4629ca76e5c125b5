package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// probe starts every statement this bench runs on a measured database, so that the statement
// profile tells the bench's own probes (snapshots, drain polls, the latency query) from the
// product's: pg_stat_statements keeps the text, comments included, of a statement's first
// run.
const probe = "/* bench probe */ "

// Statement is one normalized statement (pg_stat_statements: constants as $n) over a phase.
type Statement struct {
	Query  string  `json:"query"` // whitespace collapsed
	Calls  int64   `json:"calls"`
	ExecMS float64 `json:"total_exec_ms"`
	Rows   int64   `json:"rows"`
	// Probe: one of this bench's own statements, left out of the verdict.
	Probe bool `json:"bench_probe,omitempty"`
}

// Statements is what a phase's database executed, statement by statement, costliest (by
// total execution time) first.
type Statements struct {
	List []Statement `json:"statements"`
	// Evicted counts the entries pg_stat_statements dropped during the phase to make room
	// (pg_stat_statements.max, cluster-wide): the profile may then miss a rare statement.
	Evicted int64 `json:"evicted"`
}

// statementMeter resets and reads pg_stat_statements for one database at a time. It works
// from a database of the run's own (the extension's view lives there), so its reads never
// show in a measured database's profile.
type statementMeter struct {
	db *pgxpool.Pool
}

// errNoStatements says what to do when the cluster runs without pg_stat_statements.
var errNoStatements = errors.New("pg_stat_statements is not loaded on the cluster: scripts/services.sh (make services) " +
	"adds it to the dev cluster's shared_preload_libraries, and a cluster that was already running loads it at its next " +
	"restart: scripts/services.sh restart-pg (every session on the cluster is cut)")

// checkStatementsLoaded fails with errNoStatements unless the cluster preloads
// pg_stat_statements.
func checkStatementsLoaded(ctx context.Context, admin *pgxpool.Pool) error {
	var libs string
	if err := admin.QueryRow(ctx, `SHOW shared_preload_libraries`).Scan(&libs); err != nil {
		return err
	}
	for l := range strings.SplitSeq(libs, ",") {
		if strings.TrimSpace(strings.Trim(l, `"`)) == "pg_stat_statements" {
			return nil
		}
	}
	return fmt.Errorf("%w (shared_preload_libraries = %q)", errNoStatements, libs)
}

// statements returns the run's statement meter, creating its database on the first call.
func (b *bench) statements(ctx context.Context) (*statementMeter, error) {
	if b.stmts != nil {
		return b.stmts, nil
	}
	u, err := b.newDB(ctx, "stats")
	if err != nil {
		return nil, err
	}
	db, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		db.Close()
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	b.stmts = &statementMeter{db: db}
	return b.stmts, nil
}

// close closes the meter's pool.
func (m *statementMeter) close() {
	if m != nil {
		m.db.Close()
	}
}

// dbName is the database a URL names.
func dbName(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(u.Path, "/"), nil
}

// reset forgets the statements of database db (its URL) and returns the cluster's eviction
// count, for read.
func (m *statementMeter) reset(ctx context.Context, dbURL string) (evicted int64, err error) {
	name, err := dbName(dbURL)
	if err != nil {
		return 0, err
	}
	err = m.db.QueryRow(ctx, `SELECT (SELECT dealloc FROM pg_stat_statements_info),
		pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = $1), 0)`, name).Scan(&evicted, nil)
	return evicted, err
}

// read returns what database db (its URL) executed since reset, which returned evicted.
func (m *statementMeter) read(ctx context.Context, dbURL string, evicted int64) (*Statements, error) {
	name, err := dbName(dbURL)
	if err != nil {
		return nil, err
	}
	rows, err := m.db.Query(ctx, `SELECT query, calls, total_exec_time, rows FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1) AND calls > 0
		ORDER BY total_exec_time DESC`, name)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Statement, error) {
		var s Statement
		err := r.Scan(&s.Query, &s.Calls, &s.ExecMS, &s.Rows)
		s.Probe = strings.HasPrefix(s.Query, strings.TrimSpace(probe))
		s.Query = normalizeQuery(s.Query)
		s.ExecMS = round3(s.ExecMS)
		return s, err
	})
	if err != nil {
		return nil, err
	}
	st := &Statements{List: list}
	var now int64
	if err := m.db.QueryRow(ctx, `SELECT dealloc FROM pg_stat_statements_info`).Scan(&now); err != nil {
		return nil, err
	}
	st.Evicted = now - evicted
	return st, nil
}

// commentRe matches SQL comments; pg_stat_statements keeps them in a statement's text but
// stands $n for every constant, so no string literal can hold one.
var commentRe = regexp.MustCompile(`(?s)--[^\n]*|/\*.*?\*/`)

// normalizeQuery drops a statement's comments (the bench's probe mark among them) and
// collapses its whitespace; pg_stat_statements already stands $n for its constants.
func normalizeQuery(q string) string {
	return strings.Join(strings.Fields(commentRe.ReplaceAllString(q, " ")), " ")
}

// StatementCost is one statement's cost per completed saga.
type StatementCost struct {
	Statement
	CallsPerSaga float64
	MSPerSaga    float64
	Share        float64 // of the statements' time (the bench's probes left out)
}

// perSaga returns the statements (the bench's probes left out) with their cost per saga, and
// their total execution time per saga; nothing if no saga completed.
func (s *Statements) perSaga(completed int64) (list []StatementCost, totalMS float64) {
	if s == nil || completed <= 0 {
		return nil, 0
	}
	var total float64
	for _, st := range s.List {
		if !st.Probe {
			total += st.ExecMS
		}
	}
	for _, st := range s.List {
		if st.Probe {
			continue
		}
		c := StatementCost{Statement: st, CallsPerSaga: float64(st.Calls) / float64(completed), MSPerSaga: st.ExecMS / float64(completed)}
		if total > 0 {
			c.Share = st.ExecMS / total
		}
		list = append(list, c)
	}
	return list, total / float64(completed)
}

// verdict is the one line that names a phase's costliest statement by execution time per
// saga.
func (s *Statements) verdict(completed int64) string {
	list, total := s.perSaga(completed)
	if len(list) == 0 {
		return "no statement profile"
	}
	c := list[0] // read orders by total time
	v := fmt.Sprintf("costliest statement: %s — %.3f ms/saga, %.0f%% of the %.3f ms/saga the database spent executing statements, the bench's probes left out (%.2f calls/saga, %.1f µs/call)",
		describe(c.Query, 90), c.MSPerSaga, c.Share*100, total, c.CallsPerSaga, c.ExecMS*1000/float64(c.Calls))
	if s.Evicted > 0 {
		v += fmt.Sprintf("; pg_stat_statements evicted %d entries meanwhile, so rare statements may be missing", s.Evicted)
	}
	return v
}

var (
	tableRe = regexp.MustCompile(`(?i)\b(FROM|INTO|UPDATE|JOIN)\s+("?[a-z_][a-z0-9_]*"?(?:\."?[a-z_][a-z0-9_]*"?)?)`)
	cteRe   = regexp.MustCompile(`(?i)(?:\bWITH|,)\s+([a-z_][a-z0-9_]*)\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s+)?\(`)
)

// notTable are the words after which FROM names no table, and the words after UPDATE that
// are none (DO UPDATE SET, FOR UPDATE SKIP LOCKED, FOR UPDATE OF t, FOR UPDATE NOWAIT).
var notTable = map[string]bool{
	"set": true, "skip": true, "of": true, "nowait": true,
	"epoch": true, "year": true, "month": true, "day": true, "hour": true, "minute": true, "second": true,
	"milliseconds": true, "microseconds": true, "dow": true, "doy": true, "week": true,
	"distinct": true, "both": true, "leading": true, "trailing": true,
}

// tablesOf lists the tables a statement reads or writes, in order of first mention: its
// common table expressions and set-returning functions left out.
func tablesOf(q string) []string {
	ctes := map[string]bool{}
	for _, m := range cteRe.FindAllStringSubmatch(q, -1) {
		ctes[strings.ToLower(m[1])] = true
	}
	var out []string
	for _, m := range tableRe.FindAllStringSubmatchIndex(q, -1) {
		if before := strings.Fields(q[:m[0]]); len(before) > 0 {
			w := before[len(before)-1]
			if w = strings.ToLower(w[strings.LastIndex(w, "(")+1:]); notTable[w] || strings.HasPrefix(w, "$") {
				continue // extract(epoch FROM x), IS DISTINCT FROM x, trim(both FROM x)
			}
		}
		name := strings.ToLower(strings.ReplaceAll(q[m[4]:m[5]], `"`, ""))
		fromFunction := strings.EqualFold(q[m[2]:m[3]], "FROM") || strings.EqualFold(q[m[2]:m[3]], "JOIN")
		if fromFunction && strings.HasPrefix(strings.TrimSpace(q[m[5]:]), "(") {
			continue // FROM unnest(…): a function
		}
		if ctes[name] || notTable[name] || slices.Contains(out, name) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// describe is a statement's text cut to n runes, followed by the tables it touches (the cut
// may hide them).
func describe(q string, n int) string {
	d := shorten(q, n)
	if ts := tablesOf(q); len(ts) > 0 {
		d += " [" + strings.Join(ts, ", ") + "]"
	}
	return d
}

// shorten cuts s to n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
