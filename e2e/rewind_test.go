package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// pgTool returns the path of a PostgreSQL client program (pg_dump, pg_restore): on PATH, or
// in the newest /usr/lib/postgresql/*/bin, where Debian's server packages put it.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	require.NotEmpty(t, m, "%s: not on PATH nor under /usr/lib/postgresql/*/bin (Debian's postgresql-client)", name)
	slices.Sort(m)
	return m[len(m)-1]
}

// pgDump takes a backup of the wallet's schema (public) of the database at dbURL, in pg_dump's
// custom format, and returns its file.
func pgDump(t *testing.T, dbURL string) string {
	t.Helper()
	return pgDumpSchema(t, dbURL, "public")
}

// pgDumpSchema takes a backup of schema of the database at dbURL, in pg_dump's custom format,
// and returns its file.
func pgDumpSchema(t *testing.T, dbURL, schema string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), schema+".dump")
	out, err := exec.Command(pgTool(t, "pg_dump"), "--format=custom", "--schema="+schema, "--file="+file, "--dbname="+dbURL).CombinedOutput()
	require.NoError(t, err, "pg_dump: %s", out)
	return file
}

// pgRestore restores file over the database at dbURL, as an operator restores a backup into
// the database it came from: what is there is dropped and made again from the backup.
func pgRestore(t *testing.T, dbURL, file string) {
	t.Helper()
	out, err := exec.Command(pgTool(t, "pg_restore"), "--clean", "--if-exists", "--single-transaction", "--exit-on-error",
		"--dbname="+dbURL, file).CombinedOutput()
	require.NoError(t, err, "pg_restore: %s", out)
}

// acceptedOf returns what the provider accepted (200, not a replayed answer) of user's SMS,
// in order.
func acceptedOf(p *smsprovider.Provider, user int64) []smsprovider.Call {
	return p.Calls(func(c smsprovider.Call) bool { return c.Status == 200 && !c.Replayed && c.UserID == user })
}

// seqTexts lists calls as "<seq> <text>".
func seqTexts(calls []smsprovider.Call) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, fmt.Sprintf("%d %s", c.Seq, c.Text))
	}
	return out
}

// lastSeq reads where user stands at the notifier's gate.
func (s *stack) lastSeq(user int64) int64 {
	s.t.Helper()
	var last int64
	require.NoError(s.t, s.notify.QueryRow(context.Background(), `SELECT last_seq FROM notify.progress WHERE user_id = $1`, user).Scan(&last))
	return last
}

// TestARestoredWalletDatabaseSwallowsNoSMS: the wallet's database is restored from a backup
// under a notifier that keeps a database of its own. A user had seqs 1 and 2 when the
// backup was taken, then 3 and 4 (texted), then 5, which waits at the notifier behind an SMS
// provider outage when the restore happens. After the restore the wallet hands out seqs 3
// and 4 again, for other balances: both are texted, in order, under keys the provider has
// not seen, and seq 5 of the rewound history, a balance that no longer exists, is never
// sent. The notifier sets aside what it held of the rewound history and says so in its
// audit trail; walletsvc says the history rewound in its metrics.
func TestARestoredWalletDatabaseSwallowsNoSMS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStackApart(t)
	p := newProvider(t)
	w := s.start("walletsvc", nil)
	// No SMS is dead-lettered in this test: the outage must hold seq 5 pending.
	s.start("notifier", webhookEnv(p, "1h"))
	a := api{t: t, base: func() string { return w.url }}
	user := a.createUser("rewound", okPhone(1))
	accepted := func() []smsprovider.Call { return acceptedOf(p, user) }
	waitAccepted := func(k int) {
		t.Helper()
		wait.Until(t, 60*time.Second, fmt.Sprintf("%d SMS accepted", k), func() bool { return len(accepted()) >= k })
	}

	a.depositWait(user, 10000, "before-1") // balance 100.00
	a.depositWait(user, 20000, "before-2") // 300.00
	waitAccepted(2)
	backup := pgDump(t, s.dbURL)
	a.depositWait(user, 30000, "lost-3") // 600.00
	a.depositWait(user, 40000, "lost-4") // 1000.00
	waitAccepted(4)
	var before int64
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT max(epoch) FROM wallet_epochs`).Scan(&before))

	p.SetOutage(true)
	a.depositWait(user, 50000, "lost-5") // 1500.00: pending at the notifier when the restore comes
	wait.Until(t, 60*time.Second, "seq 5 in the notifier's inbox", func() bool {
		var k int
		require.NoError(t, s.notify.QueryRow(ctx, `SELECT count(*) FROM notify.notifications WHERE user_id = $1 AND seq = 5 AND status = 'pending'`, user).Scan(&k))
		return k == 1
	})

	w.stop(t)
	pgRestore(t, s.dbURL, backup)
	w = s.start("walletsvc", nil)
	var after int64
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT max(epoch) FROM wallet_epochs`).Scan(&after))
	require.Greater(t, after, before, "walletsvc began a new epoch on the restored database")

	a.depositWait(user, 1000, "after-3") // seq 3 again: 310.00
	wait.Until(t, 60*time.Second, "the notifier to take the new epoch", func() bool {
		var epoch int64
		require.NoError(t, s.notify.QueryRow(ctx, `SELECT epoch FROM notify.progress WHERE user_id = $1`, user).Scan(&epoch))
		return epoch == after
	})
	p.SetOutage(false)
	a.depositWait(user, 2000, "after-4") // seq 4 again: 330.00
	waitAccepted(6)
	wait.Until(t, 60*time.Second, "every SMS", s.smsDone)

	calls := accepted()
	texts := seqTexts(calls)
	keys := make([]string, 0, len(calls))
	for _, c := range calls {
		keys = append(keys, c.Key)
	}
	require.Equal(t, []string{
		"1 You topped up 100.00 CNY. Balance: 100.00 CNY.",
		"2 You topped up 200.00 CNY. Balance: 300.00 CNY.",
		"3 You topped up 300.00 CNY. Balance: 600.00 CNY.",
		"4 You topped up 400.00 CNY. Balance: 1000.00 CNY.",
		"3 You topped up 10.00 CNY. Balance: 310.00 CNY.",
		"4 You topped up 20.00 CNY. Balance: 330.00 CNY.",
	}, texts, "every balance texted in order, the rewound seq 5 never")
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(keys))), 6, "each SMS under a key of its own")
	require.True(t, strings.HasSuffix(keys[4], fmt.Sprintf(":%d:3:%d", user, after)), "the new seq 3's key names the new epoch: %s", keys[4])

	set := func(sql string) int {
		var k int
		require.NoError(t, s.notify.QueryRow(ctx, sql, user).Scan(&k))
		return k
	}
	require.Equal(t, 3, set(`SELECT count(*) FROM notify.rewound WHERE user_id = $1 AND what = 'inbox' AND seq IN (3, 4, 5)`),
		"the inbox rows of seqs 3–5 of the rewound history are set aside")
	require.Equal(t, 1, set(`SELECT count(*) FROM notify.audit WHERE action = 'history_rewound' AND user_id = $1 AND seq = 3`))
	s.audit() // the money and the outbox (the SMS went through the provider above, not the SMS log)
	require.Contains(t, metricsText(t, &proc{url: w.url}), "walletsaga_wallet_history_rewound_timestamp_seconds")
	require.NotContains(t, metricsText(t, &proc{url: w.url}), "walletsaga_wallet_history_rewound_timestamp_seconds 0\n")
}

// TestARestoredNotifierDatabaseMissesNoSMS: the notifier's database is restored from a backup
// while the wallet's is not, and the broker's offsets of the group are past the backup. After
// the documented procedure — stop the notifiers, restore, move the group back to the backup's
// time (scripts/services.sh reset-offsets: mqadmin resetOffsetByTime), start them — every
// balance change is texted once, in order: those the backup had not yet seen are delivered
// again, and the provider, which had those it accepted after the backup under the same keys,
// answers them with its first answers again (replayed) instead of sending them twice; the one
// made while the notifier was down and the one after it go out.
func TestARestoredNotifierDatabaseMissesNoSMS(t *testing.T) {
	t.Parallel()
	s := newStackApart(t)
	p := newProvider(t)
	w := s.start("walletsvc", nil)
	n := s.start("notifier", webhookEnv(p, "1h"))
	a := api{t: t, base: func() string { return w.url }}
	user := a.createUser("restored notifier", okPhone(2))
	delivered := func(k int) func() bool {
		return func() bool { return len(p.Delivered()[user]) >= k }
	}

	a.depositWait(user, 10000, "n-1")
	a.depositWait(user, 20000, "n-2")
	wait.Until(t, 60*time.Second, "SMS 1 and 2", delivered(2))
	wait.Until(t, 60*time.Second, "the notifier to record 1 and 2", func() bool { return s.lastSeq(user) == 2 })
	// The backup's time, a little before it: what was stored from then on is delivered again.
	backupAt := time.Now().Add(-2 * time.Second)
	backup := pgDumpSchema(t, s.env["NOTIFY_DATABASE_URL"], "notify")
	a.depositWait(user, 30000, "n-3")
	a.depositWait(user, 40000, "n-4")
	wait.Until(t, 60*time.Second, "SMS 3 and 4", delivered(4))

	n.stop(t)
	a.depositWait(user, 50000, "n-5") // while no notifier runs
	wait.Until(t, 60*time.Second, "seq 5 published", func() bool {
		return s.count(`SELECT count(*) FROM wallet_events WHERE published_at IS NULL`) == 0
	})
	pgRestore(t, s.env["NOTIFY_DATABASE_URL"], backup)
	s.broker.ResetOffsets(t, s.group, s.topic, backupAt)
	s.start("notifier", webhookEnv(p, "1h"))
	a.depositWait(user, 60000, "n-6")
	wait.Until(t, 90*time.Second, "SMS 1–6", delivered(6))
	wait.Until(t, 60*time.Second, "every SMS recorded", s.smsDone)

	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, p.Delivered()[user], "each SMS delivered once, in order")
	replayed := len(p.Calls(func(c smsprovider.Call) bool { return c.UserID == user && c.Replayed }))
	require.Equal(t, 2, replayed, "seqs 3 and 4, delivered again after the restore, were answered with their first answers: the provider had them")
	require.EqualValues(t, 6, s.lastSeq(user))
}

// TestRestoringBothDatabasesTextsEveryNewBalanceOnce: both databases are restored from backups
// of the same moment. With the procedure of docs/OPERATIONS.md (the group moved back to the
// backup's time, walletsvc started, then the notifier), the events of the undone history the
// broker delivers again reach the provider under the keys it had already (answered with their
// first answers, replayed, not sent twice), and the balance changes made after the restore, which reuse those seqs in a new
// epoch, are texted in order under keys of their own.
func TestRestoringBothDatabasesTextsEveryNewBalanceOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStackApart(t)
	p := newProvider(t)
	w := s.start("walletsvc", nil)
	n := s.start("notifier", webhookEnv(p, "1h"))
	a := api{t: t, base: func() string { return w.url }}
	user := a.createUser("both restored", okPhone(3))
	accepted := func() []smsprovider.Call { return acceptedOf(p, user) }
	a.depositWait(user, 10000, "b-1")
	a.depositWait(user, 20000, "b-2")
	wait.Until(t, 60*time.Second, "SMS 1 and 2", func() bool { return len(accepted()) == 2 })
	wait.Until(t, 60*time.Second, "the notifier to record 1 and 2", func() bool { return s.lastSeq(user) == 2 })
	backupAt := time.Now().Add(-2 * time.Second)
	walletBackup := pgDump(t, s.dbURL)
	notifyBackup := pgDumpSchema(t, s.env["NOTIFY_DATABASE_URL"], "notify")
	a.depositWait(user, 30000, "b-3") // undone by the restore
	a.depositWait(user, 40000, "b-4")
	wait.Until(t, 60*time.Second, "SMS 3 and 4", func() bool { return len(accepted()) == 4 })

	n.stop(t)
	w.stop(t)
	pgRestore(t, s.dbURL, walletBackup)
	pgRestore(t, s.env["NOTIFY_DATABASE_URL"], notifyBackup)
	s.broker.ResetOffsets(t, s.group, s.topic, backupAt)
	w = s.start("walletsvc", nil)
	s.start("notifier", webhookEnv(p, "1h"))
	a.depositWait(user, 1000, "b-3-again") // seq 3 again: 310.00
	a.depositWait(user, 2000, "b-4-again") // seq 4 again: 330.00
	wait.Until(t, 90*time.Second, "the new SMS 3 and 4", func() bool { return len(accepted()) == 6 })
	wait.Until(t, 60*time.Second, "every SMS recorded", s.smsDone)

	texts := seqTexts(accepted())
	require.Equal(t, []string{
		"1 You topped up 100.00 CNY. Balance: 100.00 CNY.",
		"2 You topped up 200.00 CNY. Balance: 300.00 CNY.",
		"3 You topped up 300.00 CNY. Balance: 600.00 CNY.",
		"4 You topped up 400.00 CNY. Balance: 1000.00 CNY.",
		"3 You topped up 10.00 CNY. Balance: 310.00 CNY.",
		"4 You topped up 20.00 CNY. Balance: 330.00 CNY.",
	}, texts, "each balance texted once, in order")
	var last, epoch, current int64
	require.NoError(t, s.notify.QueryRow(ctx, `SELECT last_seq, epoch FROM notify.progress WHERE user_id = $1`, user).Scan(&last, &epoch))
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT max(epoch) FROM wallet_epochs`).Scan(&current))
	require.EqualValues(t, 4, last)
	require.Equal(t, current, epoch, "the user stands in the wallet's new epoch")
}
