// The lanes under a backlog: what a claim costs, and how fast the lanes drain it.

package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// fillBacklog puts perUser SMS of each of users users (ids 1..users) into the inbox through
// Arrive, one seq of every user per batch, as queues deliver them: each user gets a wake row
// per batch. 20,000 other users have nothing waiting, as in a notifier that has been running.
func fillBacklog(t testing.TB, s *Store, users, perUser int) {
	t.Helper()
	_, err := s.db.Exec(context.Background(), `INSERT INTO notify.progress (user_id, last_seq) SELECT g, 3 FROM generate_series(1000001, 1020000) AS g`)
	require.NoError(t, err)
	for seq := 1; seq <= perUser; seq++ {
		batch := make([]Arrival, 0, users)
		for u := 1; u <= users; u++ {
			batch = append(batch, inbound(t, int64(u), int64(seq), 100))
		}
		for len(batch) > 0 {
			n := min(len(batch), 500)
			receive(t, s, false, batch[:n]...)
			batch = batch[n:]
		}
	}
	_, err = s.db.Exec(context.Background(), `ANALYZE notify.notifications; ANALYZE notify.progress; ANALYZE notify.wakes`)
	require.NoError(t, err)
}

// explained is what EXPLAIN (ANALYZE, BUFFERS) says of one run of a statement.
type explained struct {
	ms      float64 // execution time
	buffers int64   // shared blocks hit or read, over the whole plan
	read    float64 // rows the scans of tables and indexes produced or removed by a filter
	plan    string  // each node of the plan, indented, with the rows it read
}

// explainClaim runs the claim of n users (run heads each) under EXPLAIN (ANALYZE, BUFFERS) in
// a transaction it rolls back: the backlog is left as it was.
func explainClaim(t testing.TB, pool *pgxpool.Pool, n, run int) explained {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	return explain(t, tx, claimSQL, pg.Args{"owner": "explain", "n": n, "lease_us": time.Minute.Microseconds(), "run": run, "drain": claimDrain(n)})
}

func explain(t testing.TB, tx pgx.Tx, sql string, args pg.Args) explained {
	t.Helper()
	var raw []byte
	require.NoError(t, tx.QueryRow(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args).Scan(&raw))
	var plans []struct {
		Plan          map[string]any `json:"Plan"`
		ExecutionTime float64        `json:"Execution Time"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	require.Len(t, plans, 1)
	e := explained{ms: plans[0].ExecutionTime}
	var walk func(n map[string]any, depth int)
	num := func(n map[string]any, k string) float64 { f, _ := n[k].(float64); return f }
	var plan strings.Builder
	walk = func(n map[string]any, depth int) {
		loops := num(n, "Actual Loops")
		read := (num(n, "Actual Rows") + num(n, "Rows Removed by Filter") + num(n, "Rows Removed by Index Recheck")) * loops
		if _, ok := n["Relation Name"]; ok || n["Index Name"] != nil {
			e.read += read
		}
		fmt.Fprintf(&plan, "%s%v %v %v: %g rows\n", strings.Repeat("  ", depth), n["Node Type"], n["Relation Name"], n["Index Name"], read)
		if sub, ok := n["Plans"].([]any); ok {
			for _, s := range sub {
				walk(s.(map[string]any), depth+1)
			}
		}
	}
	walk(plans[0].Plan, 0)
	e.plan = plan.String()
	e.buffers = int64(num(plans[0].Plan, "Shared Hit Blocks") + num(plans[0].Plan, "Shared Read Blocks"))
	return e
}

// leaseSome claims n users as lane "busy" would, and leaves them leased.
func leaseSome(t testing.TB, s *Store, n, run int) {
	t.Helper()
	c, err := s.claimUsers(context.Background(), "busy", n, time.Hour, run)
	require.NoError(t, err)
	require.Len(t, c, n)
}

// BenchmarkClaimUnderBacklog: the claim statement's cost with 2,000 and 10,000 users × 5 SMS
// waiting and 256 users leased (as many as the default workers), for claims of 1, 16 and 256
// users.
func BenchmarkClaimUnderBacklog(b *testing.B) {
	for _, users := range []int{2000, 10000} {
		pool, _ := testdb.New(b)
		s := NewStore(pool)
		fillBacklog(b, s, users, 5)
		leaseSome(b, s, 256, 32)
		for _, n := range []int{1, 16, 256} {
			benchClaim(b, pool, users, n)
		}
	}
}

func benchClaim(b *testing.B, pool *pgxpool.Pool, users, n int) {
	b.Run(fmt.Sprintf("users%d/claim%d", users, n), func(b *testing.B) {
		var ms, buf, read float64
		for b.Loop() {
			e := explainClaim(b, pool, n, 32)
			ms, buf, read = ms+e.ms, buf+float64(e.buffers), read+e.read
		}
		k := float64(b.N)
		b.ReportMetric(ms/k, "ms/claim")
		b.ReportMetric(buf/k, "buffers/claim")
		b.ReportMetric(read/k, "rows-read/claim")
	})
}

// noopSender sends nothing and is not journaled: each SMS is recorded on its own, as a
// webhook provider's are.
type noopSender struct{}

func (noopSender) Send(context.Context, notify.SMS) error { return nil }

// BenchmarkLanesDrainBacklog: how fast the lanes (the default 256 workers) drain 2,000 users
// × 1, 5 and 20 SMS, with the log sender (journaled: a user's turn in one record) and with a
// sender that sends nothing (a record per SMS), and how many statements each SMS cost: fewer
// as the backlog deepens.
func BenchmarkLanesDrainBacklog(b *testing.B) {
	const users = 2000
	for _, c := range []struct {
		name   string
		sender notify.Sender
	}{{"log", senders.NewLogSender(io.Discard)}, {"noop", noopSender{}}} {
		for _, perUser := range []int{1, 5, 20} {
			b.Run(fmt.Sprintf("%s/sms%d", c.name, perUser), func(b *testing.B) {
				total := int64(users * perUser)
				var secs, stmts, records, groupRows float64
				for b.Loop() {
					b.StopTimer()
					pool, _ := testdb.New(b)
					s := NewStore(pool)
					fillBacklog(b, s, users, perUser)
					b.StartTimer()
					start := time.Now()
					l, stop := startLanes(b, s, LaneConfig{Sender: c.sender})
					wait.On(b, 5*time.Minute, "the backlog drained", recordedBy(s).Next, func() bool { return l.Stats().Sent >= total })
					secs += time.Since(start).Seconds()
					stmts, records = stmts+float64(l.claimStatements.Load()), records+float64(l.Stats().Records)
					if rs := l.RecorderStats(); rs.Groups > 0 {
						groupRows += float64(rs.Rows) / float64(rs.Groups)
					}
					stop()
				}
				k := float64(b.N)
				b.ReportMetric(float64(total)*k/secs, "SMS/s")
				b.ReportMetric(1000*stmts/(k*float64(total)), "claims/1000SMS")
				b.ReportMetric(1000*records/(k*float64(total)), "records/1000SMS")
				b.ReportMetric(groupRows/k, "SMS/record-group")
			})
		}
	}
}

// TestAClaimReadsWhatItClaims: with a backlog (2,000 users × 5 SMS, each SMS its own wake
// row, among 22,000 users), 256 users leased and 200 waiting for a retry with news, a claim of 16 users reads
// through indexes about what it takes — the news it drains, the due users it looks at, the
// heads of those it claims — never a whole table, and not more as the backlog grows. The
// plan is logged.
func TestAClaimReadsWhatItClaims(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	fillBacklog(t, s, 2000, 5)
	leaseSome(t, s, 256, 5)
	// Users 1001–1200 wait for a retry an hour away; news keeps arriving for them.
	_, err := pool.Exec(ctx, `UPDATE notify.progress SET due_at = now() + interval '1 hour' WHERE user_id BETWEEN 1001 AND 1200`)
	require.NoError(t, err)
	var news []Arrival
	for u := int64(1001); u <= 1200; u++ {
		news = append(news, inbound(t, u, 6, 100))
	}
	receive(t, s, false, news...)
	_, err = pool.Exec(ctx, `ANALYZE notify.progress; ANALYZE notify.wakes`)
	require.NoError(t, err)

	const n, run = 16, 5
	e := explainClaim(t, pool, n, run)
	require.NotContains(t, e.plan, "Seq Scan", "a claim scans a whole table:\n%s", e.plan)
	// The news it reads (claimDrain), the due users it looks at (n), their positions, the
	// wake rows it deletes and the heads of the users it claims (each user has 5 SMS and a
	// wake row per SMS).
	most := float64(claimDrain(n) + n + (claimDrain(n) + n) + n*5 + n*run)
	require.LessOrEqual(t, e.read, 2*most, "a claim of %d users reads at most about %g rows:\n%s", n, most, e.plan)
	t.Logf("claim of %d: %.0f rows read, %d buffers, %.2f ms", n, e.read, e.buffers, e.ms)
}

// TestARecordReadsWhatItRecords: with the same backlog, a record of 256 users' runs of 5 SMS
// (as a journaled sender's lanes hand them over) reads through indexes about the rows it
// writes — never a whole table. The plan is logged.
func TestARecordReadsWhatItRecords(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	fillBacklog(t, s, 2000, 5)
	const users, run = 256, 5
	claims, err := s.claimUsers(ctx, "a", users, time.Hour, run)
	require.NoError(t, err)
	require.Len(t, claims, users)
	var a recordArgs
	for _, c := range claims {
		require.Len(t, c.Heads, run)
		at := c.At
		var outs []outcome
		for _, h := range c.Heads {
			outs = append(outs, outcome{UserID: c.UserID, Seq: h.Seq, Verdict: Sent, Attempts: 1, Text: h.Text, Phone: "+1", Journal: true, Fence: at.Fence})
			at = Advance(at, h.Seq, Sent)
		}
		a.add(at, outs)
	}
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	_, err = positions(ctx, tx, lockSQL, a.uUsers)
	require.NoError(t, err)
	e := explain(t, tx, recordSQL, a.named(time.Hour, run))
	require.NotContains(t, e.plan, "Seq Scan", "a record scans a whole table:\n%s", e.plan)
	// Per SMS: its inbox row found and updated; per user: its position, its next and later
	// SMS, its wake rows, its next run.
	most := float64(users*run*2 + users*(1+2+run+run))
	require.LessOrEqual(t, e.read, 2*most, "a record of %d SMS reads at most about %g rows:\n%s", users*run, most, e.plan)
	t.Logf("record of %d SMS of %d users: %.0f rows read, %d buffers, %.2f ms", users*run, users, e.read, e.buffers, e.ms)
}
