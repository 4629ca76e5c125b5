package notifytest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BulkPhone is the phone number Bulk gives user u.
func BulkPhone(u int64) string { return fmt.Sprintf("+8613%09d", u) }

// Bulk seeds users users (ids 1..users) with perUser notifications each (seq 1..perUser)
// in one INSERT … SELECT over generate_series, their progress rows likewise, and analyzes
// the tables so that the planner sees their real size. The rows are interleaved in time:
// change i (seq s of user u is change (s−1)·users + u) is stamped i milliseconds after the
// first, the last one a second ago. One in 101 is dead-lettered, the last seq of every
// tenth user is pending (its progress one behind), the rest are sent; each event is
// addressed to BulkPhone(u) and its text says "SMS <s> of user <u>".
func Bulk(t testing.TB, pool *pgxpool.Pool, users, perUser int) {
	t.Helper()
	ctx := context.Background()
	total := users * perUser
	_, err := pool.Exec(ctx, `
INSERT INTO notify.notifications (user_id, seq, status, attempts, last_error, event, kind, text, finished_at, updated_at)
SELECT x.u, x.s, x.status, 1, CASE WHEN x.status = 'dead_lettered' THEN 'the provider refused it' END,
       jsonb_build_object('v', 1, 'event_id', x.u * 1000 + x.s, 'user_id', x.u, 'seq', x.s, 'kind', 'deposit',
                          'amount', 100, 'currency', 'CNY', 'balance_after', 100 * x.s, 'saga_id', x.i,
                          'phone', '+8613' || lpad(x.u::text, 9, '0'), 'locale', 'en', 'occurred_at', x.at),
       'deposit', 'SMS ' || x.s || ' of user ' || x.u,
       CASE WHEN x.status = 'pending' THEN NULL ELSE x.at END, x.at
FROM (
	SELECT g.i, (g.i - 1) % $1 + 1 AS u, (g.i - 1) / $1 + 1 AS s,
	       now() - interval '1 second' - ($3 - g.i) * interval '1 millisecond' AS at,
	       CASE WHEN g.i % 101 = 0 THEN 'dead_lettered'
	            WHEN (g.i - 1) / $1 + 1 = $2 AND ((g.i - 1) % $1 + 1) % 10 = 0 THEN 'pending'
	            ELSE 'sent' END AS status
	FROM generate_series(1, $3::bigint) AS g(i)
) x`, users, perUser, total)
	if err != nil {
		t.Fatalf("notifytest: bulk notifications: %v", err)
	}
	_, err = pool.Exec(ctx, `
INSERT INTO notify.progress (user_id, last_seq)
SELECT u, CASE WHEN u % 10 = 0 THEN $2 - 1 ELSE $2 END FROM generate_series(1, $1::bigint) AS g(u)`, users, perUser)
	if err != nil {
		t.Fatalf("notifytest: bulk progress: %v", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE notify.notifications; ANALYZE notify.progress`); err != nil {
		t.Fatalf("notifytest: analyze: %v", err)
	}
}
