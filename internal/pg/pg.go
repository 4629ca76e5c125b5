// Package pg opens the PostgreSQL pool both binaries use and holds what every store shares:
// the transaction helpers (WithTx, and TwoTrips for a transaction in two round trips) and
// the SQLSTATE checks the stores translate driver errors with.
package pg

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConnectionCheck is the client_connection_check_interval the services' pools use: a
// statement left running by a client that went away ends within a second.
const ConnectionCheck = time.Second

// Options shape the pool Open returns.
type Options struct {
	// MaxConns is the least number of connections the pool may open (the URL's
	// pool_max_conns wins when higher).
	MaxConns int32
	// StatementTimeout cuts off any one statement that runs longer (SQLSTATE 57014), so a
	// backend stuck behind a lock that a stalled peer holds gives its connection back
	// instead of holding it for good. 0 leaves the server's setting (or the URL's options).
	StatementTimeout time.Duration
	// IdleInTxTimeout ends a session that stays idle inside a transaction longer, releasing
	// the locks a stalled client holds. 0 leaves the server's setting.
	IdleInTxTimeout time.Duration
	// ConnectionCheck is client_connection_check_interval: how often a backend running a
	// statement (or waiting for a lock) checks that its client is still connected, and ends
	// the statement if not. A client that gave up closes its connection, so a statement whose
	// cancel request was lost does not run on for long. 0 leaves the server's setting.
	ConnectionCheck time.Duration
	// IndexedReads sets enable_seqscan off: the planner scans a whole table only where no
	// index serves the statement. The services' statements are written to read through
	// indexes, touching O(rows they take). The planner costs a table by its live rows and its
	// statistics, so it picked sequential scans that read far more: of queue tables whose
	// pages are mostly dead rows between two vacuums (notify.wakes: 45 pages for 57 live
	// rows, scanned by 3,000 claims in 10 s), and of tables that outgrew the statistics a
	// cached plan was made with (the relay's mark read 3.4 million outbox rows in 10 s).
	IndexedReads bool
	// GenericPlans sets plan_cache_mode to force_generic_plan: a statement the pool has
	// prepared is planned once per connection, not at every execution. The server's own
	// rule keeps planning anew while a generic plan is estimated costlier than the custom
	// ones, and for the notifier's statements, which take arrays and are written as CTEs, it
	// always was: a fifth of its backends' CPU went to planning. The services' statements
	// name their constants in the SQL, so a generic plan can use every partial index a
	// custom one could; with IndexedReads it reads through the indexes whatever the
	// parameters.
	GenericPlans bool
}

// Open returns a pool on databaseURL shaped by opts, after checking the database answers.
// The timeouts are set on every connection of the pool (as runtime parameters of its
// start-up), so they hold whatever the role's or database's defaults are.
func Open(ctx context.Context, databaseURL string, opts Options) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if pc.MaxConns < opts.MaxConns {
		pc.MaxConns = opts.MaxConns
	}
	params := pc.ConnConfig.RuntimeParams
	if opts.StatementTimeout > 0 {
		params["statement_timeout"] = strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
	}
	if opts.ConnectionCheck > 0 {
		params["client_connection_check_interval"] = strconv.FormatInt(opts.ConnectionCheck.Milliseconds(), 10)
	}
	if opts.IndexedReads {
		params["enable_seqscan"] = "off"
	}
	if opts.GenericPlans {
		params["plan_cache_mode"] = "force_generic_plan"
	}
	if opts.IdleInTxTimeout > 0 {
		params["idle_in_transaction_session_timeout"] = strconv.FormatInt(opts.IdleInTxTimeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", RedactURL(databaseURL), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s unreachable: %w", RedactURL(databaseURL), err)
	}
	return pool, nil
}

// Durability is what a server says about whether a commit it acknowledged survives a crash.
type Durability struct {
	Fsync             string // "on" or "off"
	SynchronousCommit string // on, remote_apply, remote_write, local or off
}

//go:embed sql/read_durability.sql
var readDurabilitySQL string

//go:embed sql/bounds.sql
var boundsSQL string

// ReadDurability asks the server behind q (SHOW, as seen by this session).
func ReadDurability(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (Durability, error) {
	var d Durability
	if err := q.QueryRow(ctx, readDurabilitySQL).Scan(&d.Fsync, &d.SynchronousCommit); err != nil {
		return d, fmt.Errorf("reading fsync and synchronous_commit: %w", err)
	}
	return d, nil
}

// Unsafe names each setting under which a commit the server acknowledged can vanish in a
// crash; none when the server is durable. With fsync off a crash can lose or corrupt any
// recent commit; with synchronous_commit off (or local, on a primary with standbys) the last
// commits acknowledged may be lost. Either way a saga could have charged a customer whose
// saga no longer exists, or the notifier could have acknowledged messages it no longer holds.
func (d Durability) Unsafe() []string {
	var out []string
	if d.Fsync != "on" {
		out = append(out, "fsync is "+d.Fsync)
	}
	switch d.SynchronousCommit {
	case "on", "remote_apply", "remote_write":
	default:
		out = append(out, "synchronous_commit is "+d.SynchronousCommit+" (on, remote_write or remote_apply keep acknowledged commits)")
	}
	return out
}

// Querier is a pool, a connection or a transaction: what a statement runs on. A function
// that takes one lets its caller decide whether the statement joins a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Age runs query, a statement that returns one age in seconds (float8) or NULL, and returns
// it; NULL, or a negative age (clocks), is 0. Retention's "oldest row" reads share it.
func Age(ctx context.Context, q Querier, query string) (time.Duration, error) {
	var secs *float64
	if err := q.QueryRow(ctx, query).Scan(&secs); err != nil {
		return 0, err
	}
	if secs == nil || *secs < 0 {
		return 0, nil
	}
	return time.Duration(*secs * float64(time.Second)), nil
}

// Beginner is a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Bounds are limits the server keeps on one transaction by itself, set with SET LOCAL in the
// round trip of its BEGIN (no statement of their own). A client-side deadline alone does not
// bound what the server does: when a context ends during a statement, pgx closes the
// connection and sends a cancel request, and the server drops a cancel that lands while the
// backend is between protocol messages (reading the next one). The statement then runs on
// after the client gave up, and a statement waiting for a lock keeps every lock its
// transaction took until that lock comes free, however long that is. With Bounds the server
// ends it itself. A zero field leaves that setting as the session has it.
type Bounds struct {
	// Lock is lock_timeout: the longest any one statement waits for a lock (SQLSTATE 55P03).
	Lock time.Duration
	// Statement is statement_timeout: the longest any one statement runs (SQLSTATE 57014).
	Statement time.Duration
	// IdleInTx is idle_in_transaction_session_timeout: the longest the transaction may wait
	// for its client's next statement before the server ends the session.
	IdleInTx time.Duration
}

// UntilDeadline returns Bounds that end the transaction, on the server, no later than ctx's
// deadline would on the client: each bound is the time left until it (zero Bounds when ctx
// has no deadline). Whatever the client gives up on, the server then gives up on too.
func UntilDeadline(ctx context.Context) Bounds {
	d, ok := ctx.Deadline()
	if !ok {
		return Bounds{}
	}
	left := max(time.Until(d), time.Millisecond)
	return Bounds{Lock: left, Statement: left, IdleInTx: left}
}

// beginQuery is BEGIN and the SET LOCALs of b, sent as one simple-protocol message. It is
// built here, not a file in sql/: which settings it sets depends on b, and SET takes no
// parameters.
func (b Bounds) beginQuery() string {
	q := "BEGIN"
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"lock_timeout", b.Lock}, {"statement_timeout", b.Statement}, {"idle_in_transaction_session_timeout", b.IdleInTx}} {
		if s.d > 0 {
			// At least 1 ms: 0 would mean "no limit" to the server.
			q += fmt.Sprintf("; SET LOCAL %s = %d", s.name, max(s.d.Milliseconds(), 1))
		}
	}
	return q
}

// rollbackTimeout bounds a rollback, which runs on a context of its own.
const rollbackTimeout = 5 * time.Second

// WithTx runs fn in a transaction on db and commits it if fn returns nil. If fn returns an
// error or panics, the transaction is rolled back, and the error is returned or the panic
// goes on. The rollback does not use ctx's cancellation (a cancelled request must still
// release its locks at once, not when the connection is next used), only its values, and is
// bounded by rollbackTimeout; a rollback that fails closes the connection, which ends the
// transaction on the server too. Either way the connection goes back to a pool clean.
func WithTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error) error {
	return withTx(ctx, db, pgx.TxOptions{}, fn)
}

// WithBoundedTx is WithTx with the server itself keeping the transaction within b: a statement
// that waits for a lock or runs past its bound is ended by the server even when the client
// has already given up on it (see Bounds), so the locks it holds come free within the bound.
func WithBoundedTx(ctx context.Context, db Beginner, b Bounds, fn func(pgx.Tx) error) error {
	return withTx(ctx, db, pgx.TxOptions{BeginQuery: b.beginQuery()}, fn)
}

func withTx(ctx context.Context, db Beginner, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Deferred without a condition, so it runs while a panic unwinds too; after a commit it
	// is a no-op (pgx.ErrTxClosed, no round trip).
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// TwoTrips runs a transaction on one of db's connections in two round trips, where
// WithBoundedTx spends one on BEGIN and one on COMMIT besides its statements': BEGIN, and
// the SET LOCALs of b, go with the statements first queues; then, once their results are
// read (by their queued callbacks, in order), the statements second queues go with
// COMMIT. first is for what second depends on (rows to lock and read); second may queue
// nothing, and may return an error, which rolls back. Any error rolls the transaction back
// on a context of its own, as WithTx does; a connection left inside a transaction (a
// rollback that failed) is closed, not reused.
func TwoTrips(ctx context.Context, db *pgxpool.Pool, b Bounds, first func(*pgx.Batch), second func(*pgx.Batch) error) error {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Release closes a connection still inside a transaction.
	defer conn.Release()
	fail := func(err error) error {
		if conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_, _ = conn.Exec(rctx, "rollback")
		}
		return err
	}
	b1 := &pgx.Batch{}
	b1.Queue("begin")
	if q, args := b.setLocal(); q != "" {
		b1.Queue(q, args...)
	}
	first(b1)
	if err := conn.SendBatch(ctx, b1).Close(); err != nil {
		return fail(err)
	}
	b2 := &pgx.Batch{}
	if err := second(b2); err != nil {
		return fail(err)
	}
	b2.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	// Not wrapped as the commit's: the error may be any statement's of the second batch.
	if err := conn.SendBatch(ctx, b2).Close(); err != nil {
		return fail(err)
	}
	return nil
}

// setLocal returns the statement that sets b's bounds for the transaction (sql/bounds.sql)
// and its arguments; "" when b sets none. Unlike beginQuery it is one command, as a batch
// sends it (extended protocol), with the values as parameters, so its text, which the
// connection prepares once, does not change with them.
func (b Bounds) setLocal() (string, []any) {
	if b == (Bounds{}) {
		return "", nil
	}
	ms := func(d time.Duration) any {
		if d <= 0 {
			return nil // the session's own setting
		}
		return strconv.FormatInt(max(d.Milliseconds(), 1), 10) // at least 1 ms: 0 is "no limit"
	}
	return boundsSQL, []any{Args{"lock_ms": ms(b.Lock), "statement_ms": ms(b.Statement), "idle_in_tx_ms": ms(b.IdleInTx)}}
}

// Code returns the SQLSTATE of err if it is (or wraps) a Postgres error, else "". Compare it
// with github.com/jackc/pgerrcode's constants or classes (pgerrcode.IsDataException).
func Code(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// IsCode reports whether err is a Postgres error with one of the given SQLSTATEs.
func IsCode(err error, codes ...string) bool {
	code := Code(err)
	return code != "" && slices.Contains(codes, code)
}

// IsViolation reports whether err is a Postgres error with SQLSTATE code on the named
// constraint ("" for any constraint).
func IsViolation(err error, code, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code && (constraint == "" || pe.ConstraintName == constraint)
}
