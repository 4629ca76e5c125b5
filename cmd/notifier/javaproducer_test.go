package main

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/eventschema"
	"github.com/walletsaga/walletsaga/internal/testutil/javaproducer"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// TestWhatAJavaProducerSendsIsTheContractAndTheNotifierSendsIt: a Java service publishes
// wallet events with the official RocketMQ Java client, as its users do (DefaultMQProducer's
// orderly send, SelectMessageQueueByHash keyed by the user id: Spring's syncSendOrderly), its
// bodies written from the event's fields: one user's without tags or keys (a bare
// send), another's with the kind as tag and walletsvc's keys. Read back with the project's
// own orderly consumer, each message follows the topic's AsyncAPI document (body and
// properties), sits on the queue the Java client chose, which is the one walletsvc's
// default hash picks for the user; and the notifier, consuming the topic, sends every user's
// SMS in seq order and records no message as bad. Before, the document required properties
// (SHARDING_KEY, KEYS, TAGS) that such a producer never sets, though the notifier reads none.
func TestWhatAJavaProducerSendsIsTheContractAndTheNotifierSendsIt(t *testing.T) {
	t.Parallel()
	java := javaproducer.Require(t)
	contract := eventschema.Load(t, "../../internal/walletevent/asyncapi.yaml")
	const queues = 4
	b, topic, group := ownTopic(t, "java", queues)
	pool, dbURL := testdb.New(t)

	var mu sync.Mutex
	var got []ordering.Delivery
	var arrived wait.Signal
	binarytest.StartConsumer(t, b, topic, func(_ context.Context, batch []ordering.Delivery) error {
		defer arrived.Raise()
		mu.Lock()
		defer mu.Unlock()
		got = append(got, batch...)
		return nil
	})

	bare := userWith(t, func(int64) bool { return true })
	tagged := userWith(t, func(u int64) bool { return queueOf(t, u, queues) != queueOf(t, bare, queues) }, bare)
	var msgs []javaproducer.Message
	for seq := int64(1); seq <= 2; seq++ {
		msgs = append(msgs, javaproducer.Message{Event: notifytest.Event(bare, seq, walletevent.Purchase, -100*seq)})
		e := notifytest.Event(tagged, seq, walletevent.Deposit, 100*seq)
		msgs = append(msgs, javaproducer.Message{Event: e, Tags: string(e.Kind), Keys: strconv.FormatInt(e.EventID, 10) + " " + e.SeqKey()})
	}
	sent := java.Send(t, b, topic, msgs...)
	t.Logf("the RocketMQ %s Java client sent %d messages to %s", java.Version, len(sent), topic)

	byID := map[string]ordering.Delivery{}
	wait.On(t, 30*time.Second, "the Java producer's messages back from the broker", arrived.Next, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range got {
			byID[d.MsgID] = d
		}
		for _, s := range sent {
			if _, ok := byID[s.MsgID]; !ok {
				return false
			}
		}
		return true
	})
	for i, s := range sent {
		m, d := msgs[i], byID[s.MsgID]
		require.NoError(t, contract.ValidateBody(d.Body), "body %s", d.Body)
		require.NoError(t, contract.ValidateProperties(d.Properties), "properties %v", d.Properties)
		e, err := walletevent.Decode(d.Body)
		require.NoError(t, err, "the notifier's decoder takes %s", d.Body)
		require.Equal(t, m.Event.SeqKey(), e.SeqKey())
		require.Equal(t, m.Tags, d.Tag)
		require.Equal(t, m.Keys, d.Keys)
		require.Empty(t, d.ShardingKey, "the Java client has no sharding key property")
		require.Equal(t, ordering.Queue{Broker: s.Broker, ID: s.QueueID}, ordering.Queue{Broker: d.Broker, ID: d.QueueID})
		require.Equal(t, queueOf(t, e.UserID, queues), d.QueueID, "user %d on the queue walletsvc's default hash picks", e.UserID)
	}

	procs.StartFuncTest(t, "notifier", run, nil, binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": topic, "CONSUMER_GROUP": group,
		"ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	}))
	wait.Until(t, 60*time.Second, "every user's SMS, in seq order", func() bool {
		return slices.Equal(smsSent(t, pool, bare), []int64{1, 2}) && slices.Equal(smsSent(t, pool, tagged), []int64{1, 2})
	})
	var bad int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM notify.bad_messages`).Scan(&bad))
	require.Zero(t, bad, "no message recorded as bad")
}
