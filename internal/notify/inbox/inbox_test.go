package inbox_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// message is a raw message as the orderly consumer hands it to the inbox: the client's
// unique id as MsgID, and the queue its sharding key hashes to.
func message(body []byte, shardingKey string, n int64) inbox.Message {
	h := fnv.New32a()
	_, _ = h.Write([]byte(shardingKey))
	return inbox.Message{
		Topic: "wallet-events", MsgID: fmt.Sprintf("7F000001%04X%08X%012X", os.Getpid()&0xffff, uint32(time.Now().Unix()), n), //nolint:gosec // G115: the low 32 bits of the time, as a message id holds them
		ShardingKey: shardingKey, Queue: fmt.Sprintf("broker-a/%d", h.Sum32()%8), Offset: n, Body: body,
	}
}

// FuzzInbox feeds one raw message at a time to the inbox, on a real database shared by all
// inputs of a run. The inbox never fails a message for its own sake (that would hold its
// queue): a body that does not decode or render is recorded in notify.bad_messages, with a
// dead-letter intent, on its first delivery; a good one is in the inbox (new, or there
// already), and what the inbox stored decodes back to the same event — the lanes read it
// later, so a body whose meaning jsonb would change must never get in.
func FuzzInbox(f *testing.F) {
	ev := func(user, seq int64, kind walletevent.Kind, amount int64) []byte {
		b, err := walletevent.Encode(notifytest.Event(user, seq, kind, amount))
		require.NoError(f, err)
		return b
	}
	edit := func(body []byte, from, to string) []byte { return []byte(strings.Replace(string(body), from, to, 1)) }
	good := ev(1, 1, walletevent.Deposit, 10000)
	for _, s := range []struct {
		body []byte
		key  string
	}{
		{good, "1"},
		{ev(1, 2, walletevent.Purchase, -5000), "1"},
		{ev(1, 3, walletevent.Refund, 5000), "1"},
		{ev(1, 3, walletevent.Refund, 5000), "1"},         // a duplicate
		{ev(2, 2, walletevent.TransferIn, 2500), "2"},     // ahead of its predecessor
		{ev(3, 2, walletevent.TransferOut, -100), "999"},  // sent under a foreign key
		{[]byte(`{"v":1,"user_id":"not a number"}`), "4"}, // what e2e sends
		{good[:len(good)/2], "1"},                         // truncated
		{append(append([]byte{}, good...), ']'), "1"},     // trailing data
		{[]byte{}, ""},                      // empty
		{[]byte("null"), ""},                // null
		{[]byte("\xff\xfe\x00garbage"), ""}, // binary
		{edit(ev(10, 1, walletevent.Deposit, 100), `"en"`, `"e\u0000"`), "10"},                       // an escaped NUL
		{edit(ev(11, 1, walletevent.Deposit, 100), `"en"`, `"\ud800"`), "11"},                        // a lone surrogate
		{edit(ev(12, 1, walletevent.Deposit, 100), `"+8613800001234"`, "\"+86138\xff01234\""), "12"}, // invalid UTF-8
		{edit(ev(13, 1, walletevent.Deposit, 100), `"CNY"`, `"C\u0000Y"`), "13"},                     // NUL in the currency
		{edit(ev(15, 1, walletevent.Deposit, 100), `"deposit"`, `"bonus"`), "15"},                    // an unknown kind
		{edit(ev(16, 1, walletevent.Deposit, 100), `"v":1`, `"v":2`), "16"},                          // an unknown version
		{edit(ev(18, 2, walletevent.Deposit, 100), `"seq":2`, `"seq":2,"SEQ":3`), "18"},              // seq twice: jsonb would keep both
	} {
		f.Add(s.body, s.key)
	}
	pool, _ := testdb.New(f)
	in := inbox.NewInbox(inbox.NewStore(pool), gate.NewStore(pool), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	started(f, in)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte, shardingKey string) {
		d := message(body, shardingKey, n.Add(1))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, in.Handle(ctx, []inbox.Message{d}), "the inbox takes every message: %q", body)

		e, err := walletevent.Decode(body)
		if err == nil {
			_, err = notify.Render(e)
		}
		if err != nil {
			var stored []byte
			var reason string
			require.NoError(t, pool.QueryRow(ctx, `SELECT body, reason FROM notify.bad_messages WHERE msg_id = $1 AND dlq_published_at IS NULL`,
				d.MsgID).Scan(&stored, &reason), "a malformed message is recorded with its dead-letter intent: %q", body)
			if len(body) <= inbox.MaxBadBody {
				require.Equal(t, []byte(body), stored)
			} else {
				require.LessOrEqual(t, len(stored), inbox.MaxBadBody)
				require.Contains(t, string(stored), fmt.Sprintf("[cut: %d bytes in all]", len(body)))
			}
			require.NotEmpty(t, reason)
			require.LessOrEqual(t, utf8.RuneCountInString(reason), inbox.MaxBadReason)
			return
		}
		var bad int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.bad_messages WHERE msg_id = $1`, d.MsgID).Scan(&bad))
		require.Zero(t, bad, "a good message is not a bad one")
		var stored, status string
		require.NoError(t, pool.QueryRow(ctx, `SELECT event::text, status FROM notify.notifications WHERE user_id = $1 AND seq = $2`,
			e.UserID, e.Seq).Scan(&stored, &status), "in the inbox: %q", body)
		back, err := walletevent.Decode([]byte(stored))
		require.NoError(t, err, "the stored event %q (from %q) no longer decodes", stored, body)
		require.Equal(t, e.UserID, back.UserID)
		require.Equal(t, e.Seq, back.Seq)
		if msgID := d.MsgID; pool.QueryRow(ctx, `SELECT 1 FROM notify.notifications WHERE user_id = $1 AND seq = $2 AND msg_id = $3`,
			e.UserID, e.Seq, msgID).Scan(new(int)) == nil {
			// Stored from this very body (an earlier one may differ): jsonb kept its meaning.
			require.True(t, e.OccurredAt.Equal(back.OccurredAt), "stored %q from %q", stored, body)
			e.OccurredAt, back.OccurredAt = time.Time{}, time.Time{}
			require.Equal(t, e, back, "stored %q from %q", stored, body)
		}
	})
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// event is a message of the wallet event (user, seq).
func event(t *testing.T, user, seq int64) inbox.Message {
	t.Helper()
	b, err := walletevent.Encode(notifytest.Event(user, seq, walletevent.Deposit, 100))
	require.NoError(t, err)
	return inbox.Message{MsgID: fmt.Sprintf("m-%d-%d", user, seq), Queue: "broker-a/1", Body: b}
}

// TestOnlyAMessageThatMaySetABaselineStartsAUserPastSeqOne: the inbox hands each message's
// MayBaseline to the gate: a user first seen at seq 3 in a message without it starts at seq 1
// and waits for it (a late seq 1 is then sent); one first seen at seq 3 in a message with it
// (a queue's first batch after the group's first start at its end) starts at 3, a baseline.
func TestOnlyAMessageThatMaySetABaselineStartsAUserPastSeqOne(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	var got []inbox.Received
	in := inbox.NewInbox(inbox.NewStore(pool), gate.NewStore(pool), func(r inbox.Received) { got = append(got, r) }, nil)
	started(t, in)
	ctx := context.Background()
	first := event(t, 6, 3)
	first.MayBaseline = true
	require.NoError(t, in.Handle(ctx, []inbox.Message{event(t, 5, 3), first}))
	require.Equal(t, []inbox.Received{{Inserted: 2, Baselines: 1, Woken: 2}}, got)
	require.NoError(t, in.Handle(ctx, []inbox.Message{event(t, 5, 1), event(t, 6, 1)}))
	require.Equal(t, inbox.Received{Inserted: 1, Ignored: 1, Woken: 1}, got[1], "user 5's seq 1 is kept, user 6's is before its baseline")
	var last5, last6 int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT last_seq FROM notify.progress WHERE user_id = 5),
		(SELECT last_seq FROM notify.progress WHERE user_id = 6)`).Scan(&last5, &last6))
	require.Equal(t, []int64{0, 2}, []int64{last5, last6})
}

// TestBadMessagesAreRecordedOnceWithTheirIntent: a batch mixing good and bad messages is
// written in one go: the good ones reach the gate, each bad one is recorded once (a
// redelivery is a duplicate) with its dead-letter intent, and the lanes and the publisher
// are told.
func TestBadMessagesAreRecordedOnceWithTheirIntent(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	store := inbox.NewStore(pool)
	var got []inbox.Received
	in := inbox.NewInbox(store, gate.NewStore(pool), func(r inbox.Received) { got = append(got, r) }, nil)
	started(t, in)
	ctx := context.Background()
	bad := inbox.Message{MsgID: "bad-1", Queue: "broker-a/2", Offset: 7, Body: []byte(`{"v":1}`)}
	require.NotEmpty(t, inbox.Decode(bad).Bad)
	require.NoError(t, in.Handle(ctx, []inbox.Message{bad, bad, event(t, 3, 1)}))
	require.Equal(t, []inbox.Received{{Inserted: 1, Bad: 1, Duplicates: 1, Woken: 1}}, got)
	require.Equal(t, inbox.Stats{Received: 1, Bad: 1, Writes: 1}, in.Stats())

	intents, err := store.BadIntents(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []inbox.BadMessage{{MsgID: "bad-1", Body: []byte(`{"v":1}`), Reason: intents[0].Reason}}, intents)
	n, err := store.UnpublishedBad(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.NoError(t, store.MarkBadPublished(ctx, []string{"bad-1"}))
	intents, err = store.BadIntents(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, intents)

	// Found in the DLQ later: stored once, as published.
	require.NoError(t, store.RecordFoundBad(ctx, inbox.Decode(inbox.Message{MsgID: "bad-2", Queue: "broker-a/0", Body: []byte("garbage")})))
	require.NoError(t, store.RecordFoundBad(ctx, inbox.Decode(inbox.Message{MsgID: "bad-2", Queue: "broker-a/0", Body: []byte("garbage")})))
	n, err = store.UnpublishedBad(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.bad_messages`).Scan(&rows))
	require.Equal(t, 2, rows)
}

// A bad message is kept bounded, in the table and in the log: its reason (here a decoder's
// error that quotes a 5,000-character field name) to MaxBadReason characters, its body
// (here 200 KiB) to MaxBadBody bytes, each cut with a marker; a body within the bound is
// kept whole.
func TestBadMessagesAreKeptBounded(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	logs := &strings.Builder{}
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	in := inbox.NewInbox(inbox.NewStore(pool), gate.NewStore(pool), nil, log)
	started(t, in)
	ctx := context.Background()
	field := strings.Repeat("f", 5000)
	body := []byte(`{"v":1,"` + field + `":"` + strings.Repeat("é", 100<<10) + `"}`)
	require.Greater(t, len(body), 200<<10)
	small := []byte(`{"v":1,"` + field + `":1}`)
	require.NoError(t, in.Handle(ctx, []inbox.Message{
		{MsgID: "big", Queue: "broker-a/1", Body: body},
		{MsgID: "small", Queue: "broker-a/1", Body: small},
	}))

	var stored []byte
	var reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT body, reason FROM notify.bad_messages WHERE msg_id = 'big'`).Scan(&stored, &reason))
	require.LessOrEqual(t, len(stored), inbox.MaxBadBody)
	require.Greater(t, len(stored), inbox.MaxBadBody-utf8.UTFMax)
	require.True(t, utf8.Valid(stored), "cut between two characters")
	marker := fmt.Sprintf("…[cut: %d bytes in all]", len(body))
	require.True(t, strings.HasSuffix(string(stored), marker), "%q", stored[len(stored)-80:])
	kept := len(stored) - len(marker)
	require.Equal(t, string(body[:kept]), string(stored[:kept]), "the body's start is kept")
	require.Equal(t, inbox.MaxBadReason, utf8.RuneCountInString(reason))
	require.True(t, strings.HasSuffix(reason, "…"), reason)
	require.Contains(t, reason, "unknown field")

	require.NoError(t, pool.QueryRow(ctx, `SELECT body FROM notify.bad_messages WHERE msg_id = 'small'`).Scan(&stored))
	require.Equal(t, small, stored, "a body within the bound is kept whole")

	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2, logs.String())
	for _, l := range lines {
		require.Contains(t, l, "bad message")
		require.Less(t, len(l), 2*inbox.MaxBadReason+500, "the log line is bounded too")
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// started starts in's writer, and stops it when the test ends.
func started(t testing.TB, in *inbox.Inbox) {
	t.Helper()
	require.NoError(t, in.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, in.Stop(context.Background())) })
}

// poisoned is a message of (user, seq) that decodes and renders, but that the database
// refuses: its queue label holds a NUL byte, which text takes not (SQLSTATE 22021).
func poisoned(t *testing.T, user, seq int64) inbox.Message {
	t.Helper()
	m := event(t, user, seq)
	m.MsgID += "-poisoned"
	m.Queue = "broker-a/\x001"
	require.Empty(t, inbox.Decode(m).Bad, "the poison decodes and renders: only the database refuses it")
	return m
}

// TestQueuesShareInboxCommits: the batches that several queues hand over at once are
// written in fewer transactions than batches; every batch is acknowledged (Handle returns)
// only once its rows are committed; none is lost; and a message the database refuses fails
// alone: it is recorded as bad, its queue-mates and the other queues' batches are written.
func TestQueuesShareInboxCommits(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	in := inbox.NewInbox(inbox.NewStore(pool), gate.NewStore(pool), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	started(t, in)
	ctx := context.Background()
	const queues, rounds, perBatch = 8, 10, 3
	// round hands each queue's batch of perBatch messages (one user per message, its seq
	// the round) to the inbox at once; with poison, queue 0's second message is poisoned.
	round := func(round int64, poison bool) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for q := range int64(queues) {
			batch := make([]inbox.Message, perBatch)
			for i := range int64(perBatch) {
				batch[i] = event(t, q*100+i+1, round)
			}
			if q == 0 && poison {
				batch[1] = poisoned(t, 1000+round, 1)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				require.NoError(t, in.Handle(ctx, batch))
				// Acknowledged: each of its messages is committed, seen from another
				// connection.
				for _, m := range batch {
					var n int
					require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM notify.notifications WHERE msg_id = $1)
						+ (SELECT count(*) FROM notify.bad_messages WHERE msg_id = $1)`, m.MsgID).Scan(&n))
					require.Equal(t, 1, n, "message %s committed before its batch was acknowledged", m.MsgID)
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	for r := range int64(rounds) {
		round(r+1, false)
	}
	s := in.Stats()
	require.Less(t, s.Writes, int64(queues*rounds), "the queues' batches share transactions")
	require.Equal(t, int64(queues*rounds*perBatch), s.Received, "no message lost")

	round(rounds+1, true)
	s = in.Stats()
	require.Equal(t, int64(1), s.Bad, "the poisoned message alone is recorded as bad")
	want := queues * (rounds + 1) * perBatch
	require.Equal(t, int64(want-1), s.Received, "every other message is in the inbox")
	var inInbox int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.notifications`).Scan(&inInbox))
	require.Equal(t, want-1, inInbox)
	var reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT reason FROM notify.bad_messages WHERE msg_id LIKE '%-poisoned'`).Scan(&reason))
	require.Contains(t, reason, "the database refused it")
}
