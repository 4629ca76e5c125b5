package notify_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// delivery is a raw message as the orderly consumer hands it to the inbox: the client's
// unique id as MsgID, and the queue its sharding key hashes to.
func delivery(body []byte, shardingKey string, n int64) ordering.Delivery {
	h := fnv.New32a()
	_, _ = h.Write([]byte(shardingKey))
	return ordering.Delivery{
		Topic: "wallet-events", MsgID: fmt.Sprintf("7F000001%04X%08X%012X", os.Getpid()&0xffff, uint32(time.Now().Unix()), n), //nolint:gosec // G115: the low 32 bits of the time, as a message id holds them
		ShardingKey: shardingKey, Broker: "broker-a", QueueID: int(h.Sum32() % 8), QueueOffset: n, Body: body,
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
	store := notify.NewStore(pool)
	inbox := notify.NewInbox(store, false, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte, shardingKey string) {
		d := delivery(body, shardingKey, n.Add(1))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, inbox.Handle(ctx, []ordering.Delivery{d}), "the inbox takes every message: %q", body)

		e, err := walletevent.Decode(body)
		if err == nil {
			_, err = notify.Render(e)
		}
		if err != nil {
			var stored []byte
			var reason string
			require.NoError(t, pool.QueryRow(ctx, `SELECT body, reason FROM notify.bad_messages WHERE msg_id = $1 AND dlq_published_at IS NULL`,
				d.MsgID).Scan(&stored, &reason), "a malformed message is recorded with its dead-letter intent: %q", body)
			require.Equal(t, []byte(body), stored)
			require.NotEmpty(t, reason)
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
