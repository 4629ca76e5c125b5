package consumer

// Tests of walletsaga's patches to the consumer (see WALLETSAGA-PATCHES.md at the module's
// root). Each fails with its patch reverted; patch 1's only under -race, as make test runs
// it. The broker is the client's mocked remoting layer, answering as a broker does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"
	"go.uber.org/atomic"

	"github.com/apache/rocketmq-client-go/v2/internal"
	"github.com/apache/rocketmq-client-go/v2/internal/remote"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const (
	patchTopic      = "patch-topic"
	patchBroker     = "broker-a"
	patchBrokerAddr = "192.0.2.1:10911"
	patchClientID   = "192.0.2.9@patch"
)

func patchQueue(id int) primitive.MessageQueue {
	return primitive.MessageQueue{Topic: patchTopic, BrokerName: patchBroker, QueueId: id}
}

// newOrderlyConsumer returns a running orderly consumer in clustering mode whose client,
// name server and offset store are mocks; every queue's broker is at patchBrokerAddr.
func newOrderlyConsumer(ctrl *gomock.Controller) (*defaultConsumer, *internal.MockRMQClient) {
	namesrv := internal.NewMockNamesrvs(ctrl)
	namesrv.EXPECT().FindBrokerAddressInSubscribe(patchBroker, internal.MasterId, true).
		Return(&internal.FindBrokerResult{BrokerAddr: patchBrokerAddr}).AnyTimes()
	client := internal.NewMockRMQClient(ctrl)
	client.SetNameSrv(namesrv)
	client.EXPECT().ClientID().Return(patchClientID).AnyTimes()
	storage := NewMockOffsetStore(ctrl)
	storage.EXPECT().persist(gomock.Any()).AnyTimes()
	storage.EXPECT().remove(gomock.Any()).AnyTimes()
	dc := &defaultConsumer{
		consumerGroup:  "patch-group",
		model:          Clustering,
		consumeOrderly: true,
		cType:          _PushConsume,
		client:         client,
		storage:        storage,
		state:          atomic.NewInt32(int32(internal.StateRunning)),
		prCh:           make(chan PullRequest, 4),
	}
	return dc, client
}

// lockAnswer is a broker's answer to a lock request: the queues it locked.
func lockAnswer(t *testing.T, locked ...primitive.MessageQueue) *remote.RemotingCommand {
	body, err := json.Marshal(struct {
		MQs []primitive.MessageQueue `json:"lockOKMQSet"`
	}{locked})
	require.NoError(t, err)
	return &remote.RemotingCommand{Code: internal.ResSuccess, Body: body}
}

// requestedQueues reads the queues of a lock or unlock request, checking it is this client's.
func requestedQueues(t *testing.T, cmd *remote.RemotingCommand) []primitive.MessageQueue {
	var body struct {
		ClientID string                   `json:"clientId"`
		MQs      []primitive.MessageQueue `json:"mqSet"`
	}
	require.NoError(t, json.Unmarshal(cmd.Body, &body))
	require.Equal(t, patchClientID, body.ClientID)
	return body.MQs
}

// Patch 1: takeMessages polled the message cache without the mutex that putMessage, called
// by the pull goroutine, writes it under. Without the patch -race reports it here.
func TestTakeMessagesWaitsForAConcurrentPut(t *testing.T) {
	pq := newProcessQueue(true)
	put := make(chan struct{})
	go func() {
		defer close(put)
		pq.putMessage(&primitive.MessageExt{QueueOffset: 7, Message: primitive.Message{Body: []byte("m")}})
	}()
	msgs := pq.takeMessages(1)
	<-put
	require.Len(t, msgs, 1)
	require.Equal(t, int64(7), msgs[0].QueueOffset)
}

// Patch 3: an orderly consumer that gives a queue up on rebalance releases its broker lock,
// so that the queue's new owner need not wait for the lock to expire.
func TestARebalanceUnlocksTheQueuesItGivesUp(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	given, kept := patchQueue(0), patchQueue(1)
	dc.processQueueTable.Store(given, newProcessQueue(true))
	dc.processQueueTable.Store(kept, newProcessQueue(true))

	var unlocked []primitive.MessageQueue
	client.EXPECT().InvokeOneWay(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) error {
			require.Equal(t, internal.ReqUnlockBatchMQ, cmd.Code)
			unlocked = append(unlocked, requestedQueues(t, cmd)...)
			return nil
		}).AnyTimes()

	dc.updateProcessQueueTable(patchTopic, []*primitive.MessageQueue{&kept})

	require.Equal(t, []primitive.MessageQueue{given}, unlocked)
	_, owned := dc.processQueueTable.Load(given)
	require.False(t, owned)
}

// Patch 4: a consumer starting from the last offset (or a timestamp) asks for its group's
// offset with setZeroIfNotFound=false. The broker answers "offset 0" for a group it has no
// offset for while the queue's first messages are in memory, unless told not to: without
// the patch such a consumer replayed a young topic from its start.
func TestANewGroupStartsWhereItWasToldTo(t *testing.T) {
	const maxOffset, offsetAtTimestamp = 42, 30
	cases := []struct {
		name string
		from ConsumeFromWhere
		want int64
	}{
		{"last offset: the queue's end", ConsumeFromLastOffset, maxOffset},
		{"timestamp: the offset found for it", ConsumeFromTimestamp, offsetAtTimestamp},
		{"first offset: the queue's start", ConsumeFromFirstOffset, 0},
	}
	for _, tc := range cases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			defer ctrl.Finish()
			namesrv := internal.NewMockNamesrvs(ctrl)
			namesrv.EXPECT().FindBrokerAddrByName(patchBroker).Return(patchBrokerAddr).AnyTimes()
			client := internal.NewMockRMQClient(ctrl)
			client.SetNameSrv(namesrv)
			client.EXPECT().Start()
			client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
				func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
					offset := func(o int64) (*remote.RemotingCommand, error) {
						return &remote.RemotingCommand{Code: internal.ResSuccess,
							ExtFields: map[string]string{"offset": fmt.Sprint(o)}}, nil
					}
					switch cmd.Code {
					case internal.ReqQueryConsumerOffset:
						if cmd.ExtFields["setZeroIfNotFound"] == "false" {
							return &remote.RemotingCommand{Code: internal.ResQueryNotFound}, nil
						}
						return offset(0)
					case internal.ReqGetMaxOffset:
						return offset(maxOffset)
					case internal.ReqSearchOffsetByTimestamp:
						return offset(offsetAtTimestamp)
					}
					return nil, fmt.Errorf("unexpected request code %d", cmd.Code)
				}).AnyTimes()

			dc := &defaultConsumer{
				consumerGroup: "patch-group",
				model:         Clustering,
				client:        client,
				state:         atomic.NewInt32(0),
			}
			dc.option.FromWhere = tc.from
			dc.option.ConsumeTimestamp = "20240102150405"
			require.NoError(t, dc.start())
			defer dc.stat.ShutDownStat()

			mq := patchQueue(0)
			got, err := dc.computePullFromWhereWithException(&mq)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// Patch 7: an orderly consumer that could not lock a queue it was given rebalances again
// 500 ms later, instead of leaving the queue unconsumed until the 20 s rebalance timer.
func TestAQueueThatCouldNotBeLockedIsTriedAgainSoon(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).
		Return(lockAnswer(t), nil) // the previous owner still holds the lock
	rebalanced := make(chan struct{})
	client.EXPECT().RebalanceImmediately().Do(func() { close(rebalanced) })

	mq := patchQueue(0)
	dc.updateProcessQueueTable(patchTopic, []*primitive.MessageQueue{&mq})
	_, owned := dc.processQueueTable.Load(mq)
	require.False(t, owned)

	select {
	case <-rebalanced:
	case <-time.After(5 * time.Second):
		t.Fatal("no rebalance within 5 s of a failed lock")
	}
}

// Patch 8, first half: every lock renewal releases the broker locks this client ID holds
// on the subscribed topics' queues it does not consume (left by a predecessor with the same
// instance name, or by a renewal that raced a rebalance).
func TestALockRenewalReleasesTheQueuesItDoesNotConsume(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	owned, other1, other2 := patchQueue(0), patchQueue(1), patchQueue(2)
	dc.topicSubscribeInfoTable.Store(patchTopic, []*primitive.MessageQueue{&owned, &other1, &other2})
	dc.processQueueTable.Store(owned, newProcessQueue(true))

	var unlocked []primitive.MessageQueue
	client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
			switch cmd.Code {
			case internal.ReqLockBatchMQ:
				require.Equal(t, []primitive.MessageQueue{owned}, requestedQueues(t, cmd))
				return lockAnswer(t, owned), nil
			case internal.ReqUnlockBatchMQ:
				unlocked = append(unlocked, requestedQueues(t, cmd)...)
				return &remote.RemotingCommand{Code: internal.ResSuccess}, nil
			}
			return nil, fmt.Errorf("unexpected request code %d", cmd.Code)
		}).AnyTimes()

	dc.lockAll()

	require.ElementsMatch(t, []primitive.MessageQueue{other1, other2}, unlocked)
	v, _ := dc.processQueueTable.Load(owned)
	require.True(t, v.(*processQueue).IsLock())
}

// Patch 8, second half: a rebalance that gives a queue up waits for a lock renewal under
// way. Without that, the renewal's lock request could reach the broker after the
// rebalance's unlock, leaving the queue locked by a client that no longer consumes it.
func TestARebalanceWaitsForALockRenewal(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	mq := patchQueue(0)
	dc.topicSubscribeInfoTable.Store(patchTopic, []*primitive.MessageQueue{&mq})
	dc.processQueueTable.Store(mq, newProcessQueue(true))

	var (
		mu     sync.Mutex
		events []string
	)
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	locking, release, unlocked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
			if cmd.Code != internal.ReqLockBatchMQ {
				return nil, fmt.Errorf("unexpected request code %d", cmd.Code)
			}
			close(locking)
			<-release
			record("locked")
			return lockAnswer(t, mq), nil
		})
	client.EXPECT().InvokeOneWay(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) error {
			record("unlocked")
			close(unlocked)
			return nil
		})

	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		dc.lockAll()
	}()
	<-locking
	rebalanced := make(chan struct{})
	go func() {
		defer close(rebalanced)
		dc.updateProcessQueueTable(patchTopic, nil)
	}()

	// The renewal's lock request is in flight: the rebalance must not unlock meanwhile.
	select {
	case <-unlocked:
		t.Error("the rebalance unlocked the queue while a renewal was locking it")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	<-renewed
	<-rebalanced
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"locked", "unlocked"}, events)
}

// Patch 9: a process queue created right after its broker lock was taken is marked locked,
// so it is pulled at once rather than after the next lock renewal.
func TestAQueueLockedOnRebalanceIsPulledAsLocked(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	mq := patchQueue(0)
	client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).
		Return(lockAnswer(t, mq), nil)
	dc.storage.(*MockOffsetStore).EXPECT().readWithException(gomock.Any(), _ReadFromStore).Return(int64(5), nil)

	require.True(t, dc.updateProcessQueueTable(patchTopic, []*primitive.MessageQueue{&mq}))

	select {
	case pr := <-dc.prCh:
		require.Equal(t, mq, *pr.mq)
		require.Equal(t, int64(5), pr.nextOffset)
		require.True(t, pr.pq.IsLock(), "the new queue's process queue is not marked locked")
	default:
		t.Fatal("no pull request for the new queue")
	}
}

// Patch 12: a rebalance asks its group's consumers of the topic's brokers in turn until one
// answers, so a broker that hangs (here: times out) does not fail it. Upstream asked one
// broker at random, half the time the hung one here.
func TestTheConsumerListComesFromABrokerThatAnswers(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	const hungBroker, hungAddr = "broker-b", "192.0.2.2:10911"
	namesrv := client.GetNameSrv().(*internal.MockNamesrvs)
	namesrv.EXPECT().FindBrokerAddressInSubscribe(hungBroker, internal.MasterId, true).
		Return(&internal.FindBrokerResult{BrokerAddr: hungAddr}).AnyTimes()
	a, b := patchQueue(0), primitive.MessageQueue{Topic: patchTopic, BrokerName: hungBroker, QueueId: 0}
	dc.topicSubscribeInfoTable.Store(patchTopic, []*primitive.MessageQueue{&a, &b})
	client.EXPECT().InvokeSync(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, addr string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
			require.Equal(t, internal.ReqGetConsumerListByGroup, cmd.Code)
			if addr == hungAddr {
				return nil, errors.New("request timeout")
			}
			return &remote.RemotingCommand{Code: internal.ResSuccess, Body: []byte(`{"consumerIdList":["c1","c2"]}`)}, nil
		}).AnyTimes()
	for i := 0; i < 20; i++ { // the first broker asked is drawn at random
		require.Equal(t, []string{"c1", "c2"}, dc.findConsumerList(patchTopic))
	}
}

// walletsaga patch 13: a broker that refuses GET_MAX_OFFSET (a user without Get on the
// topic) makes the consumer's start offset an error that names the refusal, not an offset
// parsed from an answer that has none; and Assignment counts the queues held.
func TestARefusedMaxOffsetIsAnErrorThatSaysWhy(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	const addr = "192.0.2.1:10911"
	namesrv := client.GetNameSrv().(*internal.MockNamesrvs)
	namesrv.EXPECT().FindBrokerAddrByName(gomock.Any()).Return(addr).AnyTimes()
	client.EXPECT().InvokeSync(gomock.Any(), addr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
			require.Equal(t, internal.ReqGetMaxOffset, cmd.Code)
			return &remote.RemotingCommand{Code: internal.ResNoPermission, Remark: "User:it has no permission to access Topic:t"}, nil
		})
	q := patchQueue(0)
	_, err := dc.queryMaxOffset(&q)
	require.Error(t, err)
	require.Contains(t, err.Error(), "code 16: User:it has no permission")

	held, all := dc.Assignment(patchTopic)
	require.Equal(t, []int{0, 0}, []int{held, all})
	b := patchQueue(1)
	dc.topicSubscribeInfoTable.Store(patchTopic, []*primitive.MessageQueue{&q, &b})
	pq := newProcessQueue(true)
	pq.WithLock(true)
	dc.processQueueTable.Store(q, pq)
	dc.processQueueTable.Store(b, newProcessQueue(true)) // not locked: not held
	held, all = dc.Assignment(patchTopic)
	require.Equal(t, []int{1, 2}, []int{held, all})
}

// Patch 15: a shutdown unlocks its queues only once the lock request in flight (here a
// renewal's) is answered, and no lock request is sent after it. Without the patch the
// shutdown's unlock went out while the renewal's lock was still on its way, and the broker,
// handling the lock last, kept the queue locked for a client that had gone.
func TestAShutdownUnlocksAfterTheLockInFlightAndLocksNoMore(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	dc.stat = NewStatsManager()
	mq := patchQueue(0)
	dc.processQueueTable.Store(mq, newProcessQueue(true))
	pc := &pushConsumer{defaultConsumer: dc, done: make(chan struct{})}

	var (
		mu     sync.Mutex
		events []string
	)
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	locking, release, unlocked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
			require.Equal(t, []primitive.MessageQueue{mq}, requestedQueues(t, cmd))
			switch cmd.Code {
			case internal.ReqLockBatchMQ:
				close(locking) // a second lock request would panic here
				<-release
				record("locked")
				return lockAnswer(t, mq), nil
			case internal.ReqUnlockBatchMQ:
				record("unlocked")
				close(unlocked)
				return &remote.RemotingCommand{Code: internal.ResSuccess}, nil
			}
			return nil, fmt.Errorf("unexpected request code %d", cmd.Code)
		}).Times(2)
	client.EXPECT().UnregisterConsumer(dc.consumerGroup)
	client.EXPECT().Shutdown()

	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		dc.lockAll()
	}()
	<-locking
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		require.NoError(t, pc.Shutdown())
	}()

	// The renewal's lock request is in flight: the shutdown must not unlock meanwhile.
	select {
	case <-unlocked:
		t.Error("the shutdown unlocked the queue while a renewal was locking it")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	<-renewed
	<-shut
	// After the shutdown no lock request goes out, from a renewal or a single queue's.
	dc.lockAll()
	require.False(t, dc.lock(&mq))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"locked", "unlocked"}, events)
}

// Patch 15: a rebalance locks a queue it is given, then reads the queue's start offset, and
// only then puts it in the process queue table. A shutdown in between must still unlock the
// queue: without the patch the shutdown unlocked only the table's queues, and the queue
// stayed locked at the broker for the gone client until the lock expired.
func TestAShutdownUnlocksAQueueARebalanceIsStillAdding(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	dc, client := newOrderlyConsumer(ctrl)
	dc.stat = NewStatsManager()
	mq := patchQueue(0)
	dc.topicSubscribeInfoTable.Store(patchTopic, []*primitive.MessageQueue{&mq})
	pc := &pushConsumer{defaultConsumer: dc, done: make(chan struct{})}

	unlocked := make(chan []primitive.MessageQueue, 1)
	client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
			switch cmd.Code {
			case internal.ReqLockBatchMQ:
				return lockAnswer(t, requestedQueues(t, cmd)...), nil
			case internal.ReqUnlockBatchMQ:
				unlocked <- requestedQueues(t, cmd)
				return &remote.RemotingCommand{Code: internal.ResSuccess}, nil
			}
			return nil, fmt.Errorf("unexpected request code %d", cmd.Code)
		}).Times(2)
	reading, release := make(chan struct{}), make(chan struct{})
	dc.storage.(*MockOffsetStore).EXPECT().readWithException(gomock.Any(), _ReadFromStore).DoAndReturn(
		func(*primitive.MessageQueue, readType) (int64, error) {
			close(reading)
			<-release
			return 5, nil
		})
	client.EXPECT().UnregisterConsumer(dc.consumerGroup)
	client.EXPECT().Shutdown()

	rebalanced := make(chan struct{})
	go func() {
		defer close(rebalanced)
		dc.updateProcessQueueTable(patchTopic, []*primitive.MessageQueue{&mq})
	}()
	<-reading // the queue is locked at the broker, and not in the table yet
	require.NoError(t, pc.Shutdown())
	select {
	case got := <-unlocked:
		require.Equal(t, []primitive.MessageQueue{mq}, got)
	default:
		t.Error("the shutdown did not unlock the queue the rebalance had locked")
	}
	close(release)
	<-rebalanced
}

// Patch 16: after a pull that found messages, a queue waits the pull interval only when the
// pull reached the end of the queue; a backlog is pulled again at once.
func TestAPullThatLeftABacklogPullsAgainAtOnce(t *testing.T) {
	const interval = 20 * time.Millisecond
	for _, c := range []struct {
		name            string
		next, maxOffset int64
		want            time.Duration
	}{
		{"the pull reached the end of the queue", 40, 40, interval},
		{"more messages are stored behind the ones brought", 32, 40, 0},
		{"a message arrived while the answer was on its way", 40, 41, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := waitAfterFound(interval, &primitive.PullResult{Status: primitive.PullFound, NextBeginOffset: c.next, MaxOffset: c.maxOffset})
			require.Equal(t, c.want, got)
		})
	}
}

// Patch 17: a QueueStart decides, queue by queue, where a queue the group has no committed
// offset on starts, whatever FromWhere says; a queue it starts at its end has that start
// committed to the broker at once; a queue with an offset resumes there without asking; and
// the QueueStart's error is the start offset's, so the queue is not taken.
func TestTheCallerDecidesWhereEachQueueWithoutAnOffsetStarts(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	var (
		commits      []string
		groupUnknown bool // the broker has had no heartbeat of the group yet
	)
	const committed = 7
	maxOffset := int64(42)
	atEnd, atFirst, resumed, refused := patchQueue(0), patchQueue(1), patchQueue(2), patchQueue(3)
	namesrv := internal.NewMockNamesrvs(ctrl)
	namesrv.EXPECT().FindBrokerAddrByName(patchBroker).Return(patchBrokerAddr).AnyTimes()
	client := internal.NewMockRMQClient(ctrl)
	client.SetNameSrv(namesrv)
	client.EXPECT().Start()
	client.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, cmd *remote.RemotingCommand, _ time.Duration) (*remote.RemotingCommand, error) {
			offset := func(o int64) (*remote.RemotingCommand, error) {
				return &remote.RemotingCommand{Code: internal.ResSuccess, ExtFields: map[string]string{"offset": fmt.Sprint(o)}}, nil
			}
			switch cmd.Code {
			case internal.ReqQueryConsumerOffset:
				if cmd.ExtFields["queueId"] == fmt.Sprint(resumed.QueueId) {
					return offset(committed)
				}
				// A broker asked with setZeroIfNotFound (the default) answers 0 for a
				// young queue: the consumer could not tell "no offset" from "offset 0".
				if cmd.ExtFields["setZeroIfNotFound"] != "false" {
					return offset(0)
				}
				return &remote.RemotingCommand{Code: internal.ResQueryNotFound}, nil
			case internal.ReqGetMaxOffset:
				return offset(maxOffset)
			case internal.ReqUpdateConsumerOffset:
				commits = append(commits, cmd.ExtFields["queueId"]+"@"+cmd.ExtFields["commitOffset"])
				if groupUnknown {
					return &remote.RemotingCommand{Code: 26, Remark: "Group patch-group not exist!"}, nil
				}
				return &remote.RemotingCommand{Code: internal.ResSuccess}, nil
			}
			return nil, fmt.Errorf("unexpected request code %d", cmd.Code)
		}).AnyTimes()

	var asked []int
	dc := &defaultConsumer{consumerGroup: "patch-group", model: Clustering, client: client, state: atomic.NewInt32(0)}
	dc.option.FromWhere = ConsumeFromFirstOffset // what the consumer would do without the QueueStart
	dc.option.QueueStart = func(mq primitive.MessageQueue) (ConsumeFromWhere, error) {
		asked = append(asked, mq.QueueId)
		switch mq {
		case atEnd:
			return ConsumeFromLastOffset, nil
		case refused:
			return 0, errors.New("the database is away")
		}
		return ConsumeFromFirstOffset, nil
	}
	require.NoError(t, dc.start())
	defer dc.stat.ShutDownStat()

	got, err := dc.computePullFromWhereWithException(&atEnd)
	require.NoError(t, err)
	require.Equal(t, int64(maxOffset), got, "started at its end")
	require.Equal(t, []string{"0@42"}, commits, "the start at the end is committed to the broker at once")
	require.Equal(t, int64(maxOffset), dc.storage.read(&atEnd, _ReadFromMemory), "and kept for the next persist")

	got, err = dc.computePullFromWhereWithException(&atFirst)
	require.NoError(t, err)
	require.Equal(t, int64(0), got, "started at its first message")

	got, err = dc.computePullFromWhereWithException(&resumed)
	require.NoError(t, err)
	require.Equal(t, int64(committed), got, "a queue with an offset resumes there")

	_, err = dc.computePullFromWhereWithException(&refused)
	require.EqualError(t, err, "the database is away")

	require.Equal(t, []int{atEnd.QueueId, atFirst.QueueId, refused.QueueId}, asked, "asked only for the queues without an offset")
	require.Equal(t, []string{"0@42"}, commits, "a start at the first message is not committed")

	// A broker that has not had the group's heartbeat yet refuses the start's commit; by the
	// queue's first pull, which asks the broker again, a message has come.
	asked, commits, groupUnknown = nil, nil, true
	dc.storage.remove(&atEnd) // as a rebalance taking the queue does
	got, err = dc.computePullFromWhereWithException(&atEnd)
	require.NoError(t, err)
	require.Equal(t, int64(42), got, "started at its end")
	groupUnknown, maxOffset = false, 43
	got, err = dc.computePullFromWhereWithException(&atEnd)
	require.NoError(t, err)
	require.Equal(t, int64(42), got, "the first pull keeps the start: the message that came since is consumed")
	require.Equal(t, []int{atEnd.QueueId}, asked, "not asked again where the queue starts")
	require.Equal(t, []string{"0@42", "0@42"}, commits, "the refused start committed again")
}
