package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/eventschema"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// received keeps every delivery as the broker gave it.
type received struct {
	mu      sync.Mutex
	all     []ordering.Delivery
	arrived wait.Signal // raised after each batch kept
}

func (r *received) handle(_ context.Context, batch []ordering.Delivery) error {
	defer r.arrived.Raise()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, batch...)
	return nil
}

func (r *received) deliveries() []ordering.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ordering.Delivery(nil), r.all...)
}

// javaHashCode is Java's String.hashCode: s[0]*31^(n-1) + … + s[n-1] over UTF-16 code units,
// in int arithmetic (a decimal user id is ASCII: one code unit a byte).
func javaHashCode(s string) int32 {
	var h int32
	for i := range len(s) {
		h = 31*h + int32(s[i])
	}
	return h
}

// outboxRow is one event as the test writes it to the outbox.
type outboxRow struct {
	ID          int64
	Kind        walletevent.Kind
	Amount      int64
	Locale      string
	Traceparent string
}

// TestTheTopicHoldsWhatTheAsyncAPIDocumentSays publishes balance changes of every kind
// through walletsvc's relay (its outbox store, pumps and producer) to the real broker, reads
// them back with a consumer of its own, and holds every message to the topic's AsyncAPI
// document (internal/walletevent/asyncapi.yaml): its body is valid against the document's
// payload schema and its properties against the headers schema; its keys are the event id
// and "user:seq", its tag the kind, its sharding key the user id and its traceparent the
// relay's span of a traced event; it is on the queue Java's String.hashCode of the user id
// picks; and each user's events arrive in seq order, once each when told apart by (user, seq).
func TestTheTopicHoldsWhatTheAsyncAPIDocumentSays(t *testing.T) {
	t.Parallel()
	contract := eventschema.Load(t, "../../internal/walletevent/asyncapi.yaml")
	const queues = 4
	s := newRelayStack(t, queues, ordering.HashJava)
	got := &received{}
	binarytest.StartConsumer(t, s.broker, s.topic, got.handle)

	// Each user's balance changes, one of each kind, in an order the balance allows.
	story := []struct {
		kind   walletevent.Kind
		amount int64
	}{
		{walletevent.Deposit, 10000}, {walletevent.Purchase, -500}, {walletevent.Refund, 500}, {walletevent.TransferOut, -100},
		{walletevent.TransferIn, 100}, {walletevent.Reversal, 100}, {walletevent.Withdrawal, -200}, {walletevent.WithdrawalRefund, 200},
	}
	require.Len(t, story, len(walletevent.Kinds()), "every kind")
	locales := []string{"en", "zh-CN", ""}
	users := s.users(6)
	rows := map[string]outboxRow{} // by "user:seq"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, u := range users {
		traceparent := ""
		if i%2 == 1 {
			traceparent = fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
		}
		for _, e := range story {
			r := outboxRow{Kind: e.kind, Amount: e.amount, Locale: locales[i%len(locales)], Traceparent: traceparent}
			var seq int64
			require.NoError(t, s.pool.QueryRow(ctx, `
WITH w AS (UPDATE wallets SET event_seq = event_seq + 1, balance = balance + $2 WHERE user_id = $1 RETURNING event_seq, balance)
INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale, traceparent, epoch, epoch_since)
SELECT $1, w.event_seq, $3, $2, 'CNY', w.balance, 100 + $1, '+8613800138000', $4, NULLIF($5, ''), (SELECT max(epoch) FROM wallet_epochs), 1 FROM w
RETURNING id, seq`, u, r.Amount, string(r.Kind), r.Locale, r.Traceparent).Scan(&r.ID, &seq))
			rows[fmt.Sprintf("%d:%d", u, seq)] = r
		}
	}
	s.relay(s.producer, ordering.RelayConfig{})

	wait.On(t, 60*time.Second, "every event back from the broker", got.arrived.Next, func() bool {
		seen := map[string]bool{}
		for _, d := range got.deliveries() {
			seen[d.Properties["KEYS"]] = true
		}
		return len(seen) >= len(rows)
	})
	route, err := s.producer.Route(ctx, s.topic)
	require.NoError(t, err)
	require.Len(t, route.Queues, queues)

	firsts := map[int64][]int64{} // each user's seqs, first arrivals, in arrival order
	seen := map[string]bool{}
	for _, d := range got.deliveries() {
		require.NoError(t, contract.ValidateBody(d.Body), "body %s", d.Body)
		require.NoError(t, contract.ValidateProperties(d.Properties), "properties %v", d.Properties)

		var ev walletevent.Event
		require.NoError(t, json.Unmarshal(d.Body, &ev))
		key := fmt.Sprintf("%d:%d", ev.UserID, ev.Seq)
		r, ok := rows[key]
		require.True(t, ok, "an event the test wrote: %s", d.Body)
		require.Equal(t, walletevent.Version, ev.V)
		require.Positive(t, ev.Epoch)
		require.EqualValues(t, 1, ev.EpochSince)
		require.Equal(t, r.ID, ev.EventID)
		require.Equal(t, r.Kind, ev.Kind)
		require.Equal(t, r.Amount, ev.Amount)
		require.Equal(t, r.Locale, ev.Locale)
		require.Equal(t, 100+ev.UserID, ev.SagaID)

		user := strconv.FormatInt(ev.UserID, 10)
		require.Equal(t, strconv.FormatInt(r.ID, 10)+" "+key, d.Properties["KEYS"], "keys: the event id and user:seq")
		require.Equal(t, string(r.Kind), d.Properties["TAGS"], "tag: the kind")
		require.Equal(t, user, d.Properties["SHARDING_KEY"], "sharding key: the user id")
		if r.Traceparent == "" {
			require.NotContains(t, d.Properties, "traceparent")
		} else {
			require.Contains(t, d.Properties, "traceparent")
		}

		h := int(javaHashCode(user) % queues)
		if h < 0 {
			h = -h
		}
		require.Equal(t, route.Queues[h], ordering.Queue{Broker: d.Broker, ID: d.QueueID},
			"user %s on queue abs(hashCode %% %d) = %d of the Java client's list", user, queues, h)

		if !seen[key] {
			seen[key] = true
			firsts[ev.UserID] = append(firsts[ev.UserID], ev.Seq)
		}
	}
	require.Len(t, seen, len(rows))
	for _, u := range users {
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, firsts[u], "user %d's events in seq order", u)
	}
}
