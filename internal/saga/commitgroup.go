package saga

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Saga commits that are concurrent share one transaction: a group commit with a leader and
// followers, and no timer. A commit that arrives while fewer than CommitGroups groups are
// being written is written at once, alone, as one batch (one round trip, one implicit
// transaction): at low load a commit waits for nothing. One that arrives while all are
// busy queues; when a group finishes, the first queued commit leads a group of everything
// queued behind it (up to CommitGroupSize commits, maxGroupStatements statements), written
// as one batch of its members' statements, one member after the other: one implicit
// transaction, one WAL flush for all of them.
//
// Each member gets back what a lone SendBatch(…).Close() of its batch would have given it:
// the group's statements read their results into buffers, and once the group is settled
// the leader replays each member's results into the member's own result handlers, in
// order, then the error the lone batch would have returned. A statement the server refuses
// rolls the whole group back; its member gets that error (at that statement) and the
// others are sent again without it, so one member's failure costs its companions one more
// round trip, never their commit. An error whose outcome is not known (the connection lost
// mid-batch) goes to every member still in the group, as an error of its own commit, and
// nothing is sent again: as a lone commit, none of them knows whether it committed. An
// error that belongs to no statement (one refused before the batch was sent, or the server
// refusing the commit itself) has each member sent again alone.

// maxGroupStatements caps the statements of one group (a group holds at least one commit).
const maxGroupStatements = 1024

// CommitStats counts the engine's saga commits and the groups and transactions that wrote
// them.
type CommitStats struct {
	// Commits is how many saga commits were written (each is one batch of a runner's; a
	// commit planned again after a local step's statement failed counts again).
	Commits int64
	// Groups is how many groups they were written in: Commits ÷ Groups is the mean group
	// size (a commit written alone is a group of one).
	Groups int64
	// Transactions is how many batches the groups sent: a group is sent again without a
	// member the database refused.
	Transactions int64
}

// CommitStats returns what the engine's group commit counted since New.
func (e *Engine) CommitStats() CommitStats {
	c := e.commits
	return CommitStats{Commits: c.commits.Load(), Groups: c.groups.Load(), Transactions: c.sends.Load()}
}

// committer writes the engine's saga commits in groups (see above).
type committer struct {
	pool    *pgxpool.Pool
	maxSize int

	mu    sync.Mutex
	free  int          // groups that may start now; while it is above 0, nothing is queued
	queue []*commitReq // commits waiting for a group, in arrival order

	commits, groups, sends atomic.Int64

	queued func() // test hook: called after a commit joined the queue (nil: none)
}

func newCommitter(pool *pgxpool.Pool, groups, size int) *committer {
	return &committer{pool: pool, maxSize: size, free: groups}
}

// commitReq is one saga commit, from its send to its answer.
type commitReq struct {
	ctx  context.Context
	b    *pgx.Batch
	lead chan []*commitReq // the group this commit is to lead (queued commits only)
	done chan struct{}     // closed once err is set by the group's leader (queued commits only)
	err  error

	taken bool // under committer.mu: in a group, no longer queued

	// Written by the group's leader: the results of this commit's statements in the
	// latest batch that ran them, and the error after them (the commit's own).
	results []stmtResult
	tail    error
}

// send writes b, alone or in a group, and returns what b's lone SendBatch(…).Close() would
// have: b's result handlers have been called with its statements' results. A commit whose
// ctx ends while it is queued leaves the queue unwritten with ctx.Err(); once its group is
// being written it waits for the answer.
func (c *committer) send(ctx context.Context, b *pgx.Batch) error {
	req := &commitReq{ctx: ctx, b: b}
	c.mu.Lock()
	if c.free > 0 {
		c.free--
		c.mu.Unlock()
		c.leadGroup([]*commitReq{req})
		return req.err
	}
	req.lead, req.done = make(chan []*commitReq, 1), make(chan struct{})
	c.queue = append(c.queue, req)
	hook := c.queued
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	select {
	case g := <-req.lead:
		c.leadGroup(g)
		return req.err
	case <-req.done:
		return req.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !req.taken {
		c.queue = slices.DeleteFunc(c.queue, func(q *commitReq) bool { return q == req })
		c.mu.Unlock()
		return ctx.Err()
	}
	c.mu.Unlock()
	select {
	case g := <-req.lead:
		c.leadGroup(g)
	case <-req.done:
	}
	return req.err
}

// queuedCommits is how many commits wait for a group.
func (c *committer) queuedCommits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// leadGroup writes group, whose first member is the caller's commit, hands the group's
// turn to the next queued commits (or frees it), then answers the followers.
func (c *committer) leadGroup(group []*commitReq) {
	c.groups.Add(1)
	c.commits.Add(int64(len(group)))
	if len(group) == 1 {
		// Alone: exactly the lone commit, its handlers called as the results arrive.
		r := group[0]
		c.sends.Add(1)
		r.err = c.pool.SendBatch(r.ctx, r.b).Close()
	} else {
		c.write(group)
	}
	c.mu.Lock()
	next := c.take()
	if next == nil {
		c.free++
	}
	c.mu.Unlock()
	if next != nil {
		next[0].lead <- next
	}
	for _, r := range group[1:] {
		close(r.done)
	}
}

// take removes the next group from the queue: its first commit and those behind it, up to
// maxSize commits and maxGroupStatements statements. It returns nil when none waits. c.mu
// is held.
func (c *committer) take() []*commitReq {
	n, stmts := 0, 0
	for n < len(c.queue) && n < c.maxSize {
		k := len(c.queue[n].b.QueuedQueries)
		if n > 0 && stmts+k > maxGroupStatements {
			break
		}
		stmts += k
		n++
	}
	if n == 0 {
		return nil
	}
	group := slices.Clone(c.queue[:n])
	for _, r := range group {
		r.taken = true
	}
	c.queue = slices.Delete(c.queue, 0, n)
	return group
}

// write writes a group of two commits or more on one connection, and sets each member's
// err as its lone batch would have set it.
func (c *committer) write(group []*commitReq) {
	ctx, release := groupContext(group)
	defer release()
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		for _, r := range group {
			r.err = err // as a lone batch that got no connection: no handler called
		}
		return
	}
	defer conn.Release()
	todo := [][]*commitReq{group}
	for len(todo) > 0 {
		pending := todo[0]
		todo = todo[1:]
		c.sends.Add(1)
		err := conn.SendBatch(ctx, groupBatch(pending)).Close()
		if err == nil {
			for _, r := range pending {
				r.tail = nil
			}
			continue
		}
		m := slices.IndexFunc(pending, func(r *commitReq) bool {
			return len(r.results) < len(r.b.QueuedQueries) || r.failed()
		})
		closed := conn.Conn().IsClosed()
		var pgErr *pgconn.PgError
		nothingRan := m == 0 && len(pending[0].results) == 0
		commitRefused := m < 0 && errors.As(err, &pgErr)
		switch {
		case len(pending) > 1 && !closed && (nothingRan || commitRefused):
			// Either a statement could not be prepared, bound or encoded, and the batch was
			// not sent; or every statement ran and the server refused the commit itself (a
			// deferred constraint, say). Nothing was committed, and nobody knows whose the
			// error is: each member is sent alone, to get its own answer.
			for _, r := range pending {
				todo = append(todo, []*commitReq{r})
			}
		case m >= 0 && pending[m].refused() && !closed:
			// The server refused one member's statement and rolled the group back: that
			// member has its answer; the others are sent again without it.
			pending[m].tail = nil
			if rest := slices.Delete(slices.Clone(pending), m, m+1); len(rest) > 0 {
				todo = append(todo, rest)
			}
		default:
			// The commit itself failed, or the batch broke off (the connection lost, say):
			// nobody knows which member it is about, nor always whether the group committed,
			// so nothing is sent again. Every member gets an error of its own commit: after
			// all of its statements, at the one that broke off, or before its first.
			for _, r := range pending {
				r.tail = err
				if r.failed() {
					r.tail = nil
				}
			}
		}
	}
	tm := conn.Conn().TypeMap()
	for _, r := range group {
		r.err = r.replay(tm)
	}
}

// failed reports whether the latest batch that ran r's statements ended at one of them
// with an error.
func (r *commitReq) failed() bool {
	return len(r.results) > 0 && r.results[len(r.results)-1].err != nil
}

// refused reports whether that error is the server's: the statement was refused, and the
// batch's implicit transaction rolled back.
func (r *commitReq) refused() bool {
	var pgErr *pgconn.PgError
	return r.failed() && errors.As(r.results[len(r.results)-1].err, &pgErr)
}

// groupContext is the context a group is written under: the leader's values, ended only
// once every member's context has ended (nobody waits for the answer any more).
func groupContext(group []*commitReq) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(group[0].ctx))
	var live atomic.Int64
	live.Store(int64(len(group)))
	stops := make([]func() bool, len(group))
	for i, r := range group {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// groupBatch is one batch of the members' statements, member after member, each statement
// reading its results into its member's buffer (copies of the members' queued statements:
// sending rewrites a queued statement's text and arguments, and a member's own are kept
// for a later batch).
func groupBatch(members []*commitReq) *pgx.Batch {
	b := &pgx.Batch{}
	for _, r := range members {
		r.results = r.results[:0]
		for _, qq := range r.b.QueuedQueries {
			b.QueuedQueries = append(b.QueuedQueries, &pgx.QueuedQuery{SQL: qq.SQL, Arguments: qq.Arguments,
				Fn: func(br pgx.BatchResults) error {
					res := readResult(br)
					r.results = append(r.results, res)
					return res.err
				}})
		}
	}
	return b
}

// stmtResult is what one statement of a batch returned: its rows (copied off the
// connection's buffer) or its error.
type stmtResult struct {
	tag    pgconn.CommandTag
	fields []pgconn.FieldDescription
	rows   [][][]byte
	err    error
}

// readResult reads the next statement's result of br.
func readResult(br pgx.BatchResults) stmtResult {
	rows, err := br.Query()
	if err != nil {
		return stmtResult{err: err}
	}
	defer rows.Close()
	var res stmtResult
	for rows.Next() {
		raw := rows.RawValues()
		row := make([][]byte, len(raw))
		for i, v := range raw {
			if v != nil {
				row[i] = bytes.Clone(v)
			}
		}
		res.rows = append(res.rows, row)
	}
	res.fields = slices.Clone(rows.FieldDescriptions())
	rows.Close()
	if err := rows.Err(); err != nil {
		return stmtResult{err: err}
	}
	res.tag = rows.CommandTag()
	return res
}

// replay calls r's result handlers with the results its statements had, as the lone
// batch's Close would (in order, stopping at the first error), and returns what that Close
// would have returned. tm is the type map of the connection that read the results; the
// caller still holds it.
func (r *commitReq) replay(tm *pgtype.Map) error {
	br := &replayResults{tm: tm, res: r.results}
	var err error
	for _, qq := range r.b.QueuedQueries[:len(r.results)] {
		if err != nil || br.err != nil {
			break
		}
		if qq.Fn != nil {
			err = qq.Fn(br)
		} else {
			_, err = br.Exec()
		}
	}
	switch {
	case err != nil:
		return err
	case br.err != nil:
		return br.err
	}
	return r.tail
}

// errNoMoreResults is a read past a batch's results (a handler that reads two).
var errNoMoreResults = errors.New("no more results in batch")

// replayResults is a batch's results read back from buffers (pgx.BatchResults).
type replayResults struct {
	tm  *pgtype.Map
	res []stmtResult
	i   int
	err error // the first error met: every later read returns it, as pgx's do
}

func (br *replayResults) next() (stmtResult, error) {
	if br.err != nil {
		return stmtResult{}, br.err
	}
	if br.i >= len(br.res) {
		br.err = errNoMoreResults
		return stmtResult{}, br.err
	}
	res := br.res[br.i]
	br.i++
	br.err = res.err
	return res, res.err
}

func (br *replayResults) Exec() (pgconn.CommandTag, error) {
	res, err := br.next()
	return res.tag, err
}

func (br *replayResults) Query() (pgx.Rows, error) {
	res, err := br.next()
	return &replayRows{tm: br.tm, res: res, err: err, at: -1, closed: err != nil}, err
}

func (br *replayResults) QueryRow() pgx.Row {
	res, err := br.next()
	return replayRow{&replayRows{tm: br.tm, res: res, err: err, at: -1, closed: err != nil}}
}

func (br *replayResults) Close() error { return br.err }

func (br *replayResults) Tx() pgx.Tx { return nil }

// replayRows is one statement's buffered rows (pgx.Rows), scanned with the type map of the
// connection that read them, as pgx's rows are.
type replayRows struct {
	tm     *pgtype.Map
	res    stmtResult
	err    error
	at     int
	closed bool
}

func (r *replayRows) Close() { r.closed = true }

func (r *replayRows) Err() error { return r.err }

func (r *replayRows) CommandTag() pgconn.CommandTag { return r.res.tag }

func (r *replayRows) FieldDescriptions() []pgconn.FieldDescription { return r.res.fields }

func (r *replayRows) Next() bool {
	if r.closed {
		return false
	}
	r.at++
	if r.at >= len(r.res.rows) {
		r.closed = true
		return false
	}
	return true
}

func (r *replayRows) RawValues() [][]byte {
	if r.at < 0 || r.at >= len(r.res.rows) {
		return nil
	}
	return r.res.rows[r.at]
}

func (r *replayRows) fatal(err error) {
	if r.err == nil {
		r.err = err
	}
	r.closed = true
}

func (r *replayRows) Scan(dest ...any) error {
	if len(dest) == 1 {
		if rs, ok := dest[0].(pgx.RowScanner); ok {
			err := rs.ScanRow(r)
			if err != nil {
				r.fatal(err)
			}
			return err
		}
	}
	if err := pgx.ScanRow(r.tm, r.res.fields, r.RawValues(), dest...); err != nil {
		r.fatal(err)
		return err
	}
	return nil
}

func (r *replayRows) Values() ([]any, error) {
	raw := r.RawValues()
	if raw == nil {
		return nil, errors.New("rows is closed")
	}
	values := make([]any, len(raw))
	for i, buf := range raw {
		fd := r.res.fields[i]
		switch dt, ok := r.tm.TypeForOID(fd.DataTypeOID); {
		case buf == nil:
		case ok:
			v, err := dt.Codec.DecodeValue(r.tm, fd.DataTypeOID, fd.Format, buf)
			if err != nil {
				r.fatal(err)
				return nil, err
			}
			values[i] = v
		case fd.Format == pgtype.TextFormatCode:
			values[i] = string(buf)
		default:
			values[i] = bytes.Clone(buf)
		}
	}
	return values, nil
}

func (r *replayRows) Conn() *pgx.Conn { return nil }

func (r *replayRows) TypeMap() *pgtype.Map { return r.tm }

// replayRow is QueryRow's row: the first row of a statement's buffered rows.
type replayRow struct{ rows *replayRows }

func (r replayRow) Scan(dest ...any) error {
	if err := r.rows.Err(); err != nil {
		return err
	}
	if !r.rows.Next() {
		return pgx.ErrNoRows
	}
	_ = r.rows.Scan(dest...) // its error is the rows' error, returned below
	r.rows.Close()
	return r.rows.Err()
}
