package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/notifytest"
	"github.com/walletsaga/walletsaga/internal/notify/pipeline"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

const (
	topic       = "wallet-events"
	broker      = "broker-a"
	queues      = 8
	maxAttempts = 2
	// parkAfter is short so that a message waiting for a missing predecessor is parked
	// within a few redeliveries.
	parkAfter = time.Millisecond
)

// smsLog is the fake SMS provider: it writes the SMS log row in the gate's transaction, as
// the log sender does, and fails the way providers do — an amount of 4.04 is a retryable
// failure, a phone ending in 0000 a permanent one.
type smsLog struct{}

func (smsLog) Send(ctx context.Context, tx pgx.Tx, m notify.SMS) error {
	switch {
	case m.Amount == 404 || m.Amount == -404:
		return errors.New("provider unavailable")
	case strings.HasSuffix(m.Phone, "0000"):
		return fmt.Errorf("provider refused the number: %w", notify.ErrPermanent)
	}
	_, err := tx.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text) VALUES ($1, $2, $3, $4)`, m.UserID, m.Seq, m.Phone, m.Text)
	return err
}

// message is a wallet event as the orderly consumer receives it from the broker: the
// relay's tag, keys and sharding key, the client's unique id (UNIQ_KEY, which becomes MsgId),
// and the queue the sharding key hashes to.
func message(body []byte, shardingKey string, n int64) *primitive.MessageExt {
	id := fmt.Sprintf("7F000001%04X%08X%012X", os.Getpid()&0xffff, uint32(time.Now().Unix()), n)
	m := &primitive.MessageExt{
		MsgId:           id,
		OffsetMsgId:     fmt.Sprintf("7F00000100002A9F%016X", n*512),
		QueueOffset:     n,
		CommitLogOffset: n * 512,
		BornTimestamp:   time.Now().UnixMilli(),
		BornHost:        "127.0.0.1:51234",
		StoreTimestamp:  time.Now().UnixMilli(),
		StoreHost:       "127.0.0.1:10911",
	}
	m.Topic = topic
	m.Body = body
	h := fnv.New32a()
	_, _ = h.Write([]byte(shardingKey))
	m.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: broker, QueueId: int(h.Sum32() % queues)}
	m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, id)
	m.WithShardingKey(shardingKey)
	if e, err := walletevent.Decode(body); err == nil {
		m.WithTag(string(e.Kind))
		m.WithKeys([]string{strconv.FormatInt(e.EventID, 10), e.SeqKey()})
	}
	return m
}

// delivery is what the orderly consumer hands the pipeline for m (ordering's toDelivery).
func delivery(m *primitive.MessageExt) ordering.Delivery {
	return ordering.Delivery{
		Topic: m.Topic, MsgID: m.MsgId, Keys: m.GetKeys(), Tag: m.GetTags(), ShardingKey: m.GetShardingKey(),
		Broker: m.Queue.BrokerName, QueueID: m.Queue.QueueId, QueueOffset: m.QueueOffset,
		ReconsumeTimes: m.ReconsumeTimes, BornAt: time.UnixMilli(m.BornTimestamp), Body: m.Body, Properties: m.GetProperties(),
	}
}

type fixture struct {
	pool *pgxpool.Pool
	pipe *pipeline.Pipeline
	n    atomic.Int64
}

func newFixture(t testing.TB) *fixture {
	pool, _ := testdb.New(t)
	log := slog.New(slog.DiscardHandler)
	gate := ordering.NewGate(pool, ordering.GateConfig{
		MaxAttempts: maxAttempts, RetryBase: time.Millisecond, RetryMax: 2 * time.Millisecond,
		WaitBase: time.Millisecond, WaitMax: 2 * time.Millisecond, ParkAfter: parkAfter,
		IsPermanent: pipeline.IsPermanent, Logger: log,
	})
	return &fixture{pool: pool, pipe: pipeline.New(pool, gate, smsLog{}, log)}
}

// consume delivers m as the orderly consumer does: again after each Wait or RetryAfter
// (the sleep stands in for the queue's suspension), up to a bound that only a message
// blocking its queue would reach. It returns the final result and how many calls it took.
func (f *fixture) consume(t *testing.T, m *primitive.MessageExt) (ordering.Result, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for calls := 1; ; calls++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := f.pipe.Handle(ctx, delivery(m))
		cancel()
		if !res.IsRetry() {
			return res, calls
		}
		if calls >= 100 || time.Now().After(deadline) {
			t.Fatalf("the message blocks its queue: still retried after %d deliveries: %q", calls, m.Body)
		}
		m.ReconsumeTimes++
		time.Sleep(time.Millisecond)
	}
}

type state struct {
	last   int64
	status string
	smsLog int
	bad    int
}

func (f *fixture) state(t *testing.T, user, seq int64, msgID string) state {
	t.Helper()
	var s state
	err := f.pool.QueryRow(context.Background(), `SELECT
		COALESCE((SELECT last_seq FROM notify.progress WHERE user_id = $1), 0),
		COALESCE((SELECT status FROM notify.notifications WHERE user_id = $1 AND seq = $2), ''),
		(SELECT count(*) FROM notify.sms_log WHERE user_id = $1 AND seq = $2 AND NOT late),
		(SELECT count(*) FROM notify.bad_messages WHERE msg_id = $3)`, user, seq, msgID).Scan(&s.last, &s.status, &s.smsLog, &s.bad)
	require.NoError(t, err)
	return s
}

// FuzzHandle feeds one raw message at a time to the pipeline's handler, on a real database
// shared by all inputs of a run. The handler never panics; a body that does not decode or
// render is recorded in notify.bad_messages and dead-lettered at once; a good one is, given
// the user's progress before it, sent once (or dead-lettered when the provider fails for
// good), acknowledged as a duplicate, or parked behind its missing predecessor — and never
// blocks its queue.
func FuzzHandle(f *testing.F) {
	ev := func(user, seq int64, kind walletevent.Kind, amount int64) []byte {
		e := notifytest.Event(user, seq, kind, amount)
		b, err := walletevent.Encode(e)
		require.NoError(f, err)
		return b
	}
	edit := func(body []byte, old, new string) []byte { return []byte(strings.Replace(string(body), old, new, 1)) }
	good := ev(1, 1, walletevent.Deposit, 10000)
	for _, s := range []struct {
		body []byte
		key  string
	}{
		{good, "1"},
		{ev(1, 2, walletevent.Purchase, -5000), "1"},
		{ev(1, 3, walletevent.Refund, 5000), "1"},
		{ev(1, 3, walletevent.Refund, 5000), "1"},         // a duplicate
		{ev(2, 2, walletevent.TransferIn, 2500), "2"},     // ahead of its predecessor: parked
		{ev(2, 1, walletevent.Deposit, 10000), "2"},       // the predecessor: sent, then 2 drained
		{ev(3, 1, walletevent.Deposit, 404), "3"},         // the provider keeps failing: dead-lettered
		{ev(3, 2, walletevent.TransferOut, -100), "999"},  // sent under a foreign key
		{ev(3, 1, walletevent.Deposit, 404), "3"},         // a duplicate of a dead letter
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
		{edit(ev(14, 2, walletevent.Deposit, 100), `"en"`, `"e\u0000"`), "14"},                       // the same, parked
		{edit(ev(15, 1, walletevent.Deposit, 100), `"deposit"`, `"bonus"`), "15"},                    // an unknown kind
		{edit(ev(16, 1, walletevent.Deposit, 100), `"v":1`, `"v":2`), "16"},
		{edit(ev(17, 1, walletevent.Deposit, 100), `"+8613800001234"`, `"+8613800000000"`), "17"}, // refused by the provider for good
		{edit(ev(18, 2, walletevent.Deposit, 100), `"seq":2`, `"seq":2,"SEQ":3`), "18"},           // seq twice: jsonb would keep both                          // an unknown version
	} {
		f.Add(s.body, s.key)
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, body []byte, shardingKey string) {
		m := message(body, shardingKey, fx.n.Add(1))
		e, err := walletevent.Decode(body)
		if err == nil {
			_, err = notify.Render(e)
		}
		if err != nil {
			res, calls := fx.consume(t, m)
			require.Equal(t, ordering.DeadLetter(), res, "a malformed message is dead-lettered: %q", body)
			require.Equal(t, 1, calls, "at once")
			var stored []byte
			var reason string
			require.NoError(t, fx.pool.QueryRow(context.Background(), `SELECT body, reason FROM notify.bad_messages WHERE msg_id = $1`,
				m.MsgId).Scan(&stored, &reason), "a malformed message is recorded: %q", body)
			require.Equal(t, []byte(body), stored)
			require.NotEmpty(t, reason)
			return
		}

		before := fx.state(t, e.UserID, e.Seq, m.MsgId)
		res, _ := fx.consume(t, m)
		after := fx.state(t, e.UserID, e.Seq, m.MsgId)
		require.Zero(t, after.bad, "a good message is not a bad one")
		require.LessOrEqual(t, after.smsLog, 1, "one SMS per (user, seq)")
		switch {
		case e.Seq <= before.last:
			// A redelivery of a finished seq: acknowledged, or sent to the DLQ again if it
			// was dead-lettered; nothing new is sent.
			want := ordering.Ack()
			if before.status == "dead_lettered" {
				want = ordering.DeadLetter()
			}
			require.Equal(t, want, res)
			require.Equal(t, before.smsLog, after.smsLog)
		case e.Seq == before.last+1:
			require.GreaterOrEqual(t, after.last, e.Seq, "the user advanced")
			switch after.status {
			case "sent":
				require.Equal(t, ordering.Ack(), res)
				require.Equal(t, 1, after.smsLog)
			case "dead_lettered":
				require.Equal(t, ordering.DeadLetter(), res)
				require.Zero(t, after.smsLog)
			default:
				t.Fatalf("next seq ended %q", after.status)
			}
		default:
			// Ahead of a missing predecessor: parked and acknowledged, so the queue moves on.
			require.Equal(t, ordering.Ack(), res)
			require.Equal(t, "parked", after.status)
			require.Zero(t, after.smsLog)
			// What was parked must decode again, or the drain could never deliver it.
			var stored string
			require.NoError(t, fx.pool.QueryRow(context.Background(), `SELECT event::text FROM notify.notifications WHERE user_id = $1 AND seq = $2`,
				e.UserID, e.Seq).Scan(&stored))
			back, err := walletevent.Decode([]byte(stored))
			require.NoError(t, err, "the parked event %q (from %q) no longer decodes", stored, body)
			if before.status != "parked" {
				// Parked from this very body (an earlier one may differ): jsonb kept its meaning.
				require.True(t, e.OccurredAt.Equal(back.OccurredAt), "parked %q from %q", stored, body)
				e.OccurredAt, back.OccurredAt = time.Time{}, time.Time{}
				require.Equal(t, e, back, "parked %q from %q", stored, body)
			}
		}
	})
}
