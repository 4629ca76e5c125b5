package main

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/scrape"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// TestASecondStartOfALastGroupDeliversWhatCameWhileItWasDown: CONSUME_FROM=last is a
// one-shot. The group's first start begins every queue at its end: user A's deposit from
// before the group is never sent. It stops a few seconds later, having held every queue and
// sent user B's first SMS, and having consumed nothing from user A's queue (where the client
// would commit no offset of its own before its 20 s long poll). While it is down, user B
// makes a second deposit and user N, whom it never saw, two on user A's queue. The group's
// second start, with CONSUME_FROM=last still, sends all three in order, starts user N at seq
// 1 (no baseline), and still not user A's: its first start committed where it began each
// queue. Before, the second start took itself for a new group's and began user A's queue,
// which had no offset, at its end: user N's SMS were never sent.
func TestASecondStartOfALastGroupDeliversWhatCameWhileItWasDown(t *testing.T) {
	t.Parallel()
	const queues = 4
	b, topic, group := ownTopic(t, "again", queues)
	pool, dbURL := testdb.New(t)
	queueA := func(u int64) bool { return queueOf(t, u, queues) == queueOf(t, 1000, queues) }
	userA := userWith(t, queueA)
	userN := userWith(t, queueA, userA)
	userB := userWith(t, func(u int64) bool { return !queueA(u) })
	p := producerTo(t, b, topic)
	send := p.send
	send(userA, 1, -1)

	env := binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": topic, "CONSUMER_GROUP": group,
		"CONSUME_FROM": "last", "ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	})
	first := procs.StartFuncTest(t, "notifier", run, nil, env)
	waitHeld(t, first.URL, queues)
	send(userB, 1, -1)
	wait.Until(t, 30*time.Second, "user B's first SMS", func() bool { return slices.Equal(smsSent(t, pool, userB), []int64{1}) })
	require.NoError(t, first.Stop(30*time.Second))

	send(userB, 2, -1)
	send(userN, 1, queueOf(t, userA, queues))
	send(userN, 2, queueOf(t, userA, queues))
	procs.StartFuncTest(t, "notifier", run, nil, env)
	wait.Until(t, 60*time.Second, "the SMS of what came while the notifier was down", func() bool {
		return slices.Equal(smsSent(t, pool, userB), []int64{1, 2}) && slices.Equal(smsSent(t, pool, userN), []int64{1, 2})
	})
	require.Empty(t, smsSent(t, pool, userA), "user A's deposit came before the group's first start")
	var inbox int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM notify.notifications WHERE user_id = $1`, userA).Scan(&inbox))
	require.Zero(t, inbox, "nor was it read")
	var baseline *int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT baseline_seq FROM notify.progress WHERE user_id = $1`, userN).Scan(&baseline))
	require.Nil(t, baseline, "a user first seen after the first start starts at seq 1")

	var consumeFrom string
	var recorded []string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT consume_from, queues FROM notify.group_start WHERE consumer_group = $1 AND topic = $2`,
		group, topic).Scan(&consumeFrom, &recorded))
	require.Equal(t, "last", consumeFrom)
	require.Len(t, recorded, queues, "the first start's queues")
}

// TestQueuesAddedWhileTheNotifierRunsAreConsumedFromTheirFirstMessage: a topic grows from 2
// to 4 queues while a notifier of a group that started at the end of the topic
// (CONSUME_FROM=last) runs. Producers and consumers notice a new queue each on their own
// route poll: here the notifier reaches the name server through a door the test shuts while
// the topic grows, so the producer sends to the new queues before the notifier knows them.
// Once it does, it consumes the new queues from their first message: user M, who moved to a
// new queue, gets its SMS 1, 2 and 3 in order, and user F, first seen on a new queue, 1 and
// 2. Before, the client began the new queues at their end when it took them: what the
// producer had put there first was never consumed, user M waited behind the gap for good,
// and user F's first SMS were never sent.
func TestQueuesAddedWhileTheNotifierRunsAreConsumedFromTheirFirstMessage(t *testing.T) {
	t.Parallel()
	const before, after = 2, 4
	b, topic, group := ownTopic(t, "grown", before)
	pool, dbURL := testdb.New(t)
	added := func(q int) bool { return q >= before }
	onAdded := func(u int64) bool { return added(queueOf(t, u, after)) }
	userM := userWith(t, onAdded)
	userF := userWith(t, onAdded, userM)

	namesrv := newDoor(t, b.Namesrv)
	namesrv.open()
	n := procs.StartFuncTest(t, "notifier", run, nil, binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": namesrv.addr, "WALLET_EVENTS_TOPIC": topic, "CONSUMER_GROUP": group,
		"CONSUME_FROM": "last", "ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	}))
	waitHeld(t, n.URL, before)
	p := producerTo(t, b, topic)
	send := p.send
	send(userM, 1, queueOf(t, userM, before))
	wait.Until(t, 30*time.Second, "user M's first SMS", func() bool { return slices.Equal(smsSent(t, pool, userM), []int64{1}) })

	namesrv.shut() // the notifier keeps its route of 2 queues
	b.CreateTopic(t, topic, after)
	wait.Until(t, 30*time.Second, "the producer to route the added queues", func() bool { return p.queues() == after })
	send(userF, 1, queueOf(t, userF, after))
	send(userF, 2, queueOf(t, userF, after))
	send(userM, 2, queueOf(t, userM, after))
	send(userM, 3, queueOf(t, userM, after))
	require.Equal(t, before, heldQueues(t, n.URL), "the notifier has not taken the added queues yet")

	namesrv.open()
	wait.Until(t, 60*time.Second, "the SMS of what the producer put on the added queues before the notifier took them", func() bool {
		return slices.Equal(smsSent(t, pool, userM), []int64{1, 2, 3}) && slices.Equal(smsSent(t, pool, userF), []int64{1, 2})
	})
	require.Equal(t, after, heldQueues(t, n.URL))
	var baselines int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM notify.progress WHERE baseline_seq IS NOT NULL`).Scan(&baselines))
	require.Zero(t, baselines)
}

// queueOf is the queue user's events go to on a topic of queues queues on one broker (the
// relay's sharding key is the user id; on one broker a slot is a queue id).
func queueOf(t *testing.T, user int64, queues int) int {
	t.Helper()
	hash, err := ordering.ParseKeyHash("")
	require.NoError(t, err)
	return hash.Slot(strconv.FormatInt(user, 10), queues)
}

// userWith returns the first user id from 1000 on, other than not, that want accepts.
func userWith(t *testing.T, want func(user int64) bool, not ...int64) int64 {
	t.Helper()
	for u := int64(1000); u < 100_000; u++ {
		if !slices.Contains(not, u) && want(u) {
			return u
		}
	}
	t.Fatal("no user id is as wanted")
	return 0
}

// eventProducer publishes wallet events to a topic, as the relay does.
type eventProducer struct {
	t     *testing.T
	p     *ordering.OrderedProducer
	topic string
}

// producerTo returns a producer of events to topic, whose route follows the name server's
// within 200 ms.
func producerTo(t *testing.T, b rmqtest.Broker, topic string) eventProducer {
	t.Helper()
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials,
		Group: rmqtest.Unique("producer"), RoutePoll: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown() })
	return eventProducer{t: t, p: p, topic: topic}
}

// send publishes (user, seq)'s deposit event, keyed by its user as the relay keys it; a
// queue other than -1 is the one it must go to.
func (e eventProducer) send(user, seq int64, queue int) {
	e.t.Helper()
	body, err := walletevent.Encode(notifytest.Event(user, seq, walletevent.Deposit, 100*seq))
	require.NoError(e.t, err)
	res, err := e.p.SendOrderly(context.Background(), ordering.Message{Topic: e.topic, ShardingKey: strconv.FormatInt(user, 10), Tag: "deposit", Body: body})
	require.NoError(e.t, err)
	if queue >= 0 {
		require.Equal(e.t, queue, res.QueueID, "user %d's seq %d", user, seq)
	}
}

// queues is how many queues the producer's route has.
func (e eventProducer) queues() int {
	e.t.Helper()
	r, err := e.p.Route(context.Background(), e.topic)
	require.NoError(e.t, err)
	return len(r.Queues)
}

// smsSent returns the seqs of user's SMS in the SMS log, in the order they were sent.
func smsSent(t *testing.T, pool *pgxpool.Pool, user int64) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq FROM notify.sms_log WHERE user_id = $1 AND NOT late ORDER BY id`, user)
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return seqs
}

// heldQueues is how many of its topic's queues the notifier at url holds.
func heldQueues(t *testing.T, url string) int {
	t.Helper()
	v, _ := scrape.Value(scrape.Text(t, url), "walletsaga_notify_consumer_queues_held")
	return int(v)
}

// waitHeld waits until the notifier at url holds queues queues.
func waitHeld(t *testing.T, url string, queues int) {
	t.Helper()
	wait.Until(t, 60*time.Second, "the notifier to hold every queue", func() bool { return heldQueues(t, url) == queues })
}
