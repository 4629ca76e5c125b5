package internal

// Tests of walletsaga's patches to the client core (see WALLETSAGA-PATCHES.md at the
// module's root). Each fails with its patch reverted; patch 2's only under -race, as make
// test runs it. The name server and brokers are the client's mocked remoting layer.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"

	"github.com/apache/rocketmq-client-go/v2/internal/remote"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const (
	patchTopic      = "patch-topic"
	patchBroker     = "broker-a"
	patchBrokerAddr = "192.0.2.1:10911"
	patchNamesrv    = "192.0.2.1:9876"
)

// routeServer answers route queries as a name server does, with a route that the test
// changes: queues of one broker, all readable and writable.
type routeServer struct {
	mu     sync.Mutex
	queues int
}

func (s *routeServer) setQueues(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues = n
}

func (s *routeServer) answer(_ context.Context, _ string, cmd *remote.RemotingCommand) (*remote.RemotingCommand, error) {
	if cmd.Code != ReqGetRouteInfoByTopic || cmd.ExtFields["topic"] != patchTopic {
		return nil, fmt.Errorf("unexpected name server request %v", cmd)
	}
	s.mu.Lock()
	queues := s.queues
	s.mu.Unlock()
	body, err := json.Marshal(map[string]interface{}{
		"queueDatas": []map[string]interface{}{{
			"brokerName": patchBroker, "readQueueNums": queues, "writeQueueNums": queues,
			"perm": 6, "topicSynFlag": 0,
		}},
		"brokerDatas": []map[string]interface{}{{
			"cluster": "patch-cluster", "brokerName": patchBroker,
			"brokerAddrs": map[string]string{"0": patchBrokerAddr},
		}},
	})
	if err != nil {
		return nil, err
	}
	return &remote.RemotingCommand{Code: ResSuccess, Body: body}, nil
}

// newPatchNamesrv returns a name server client whose requests routes answers.
func newPatchNamesrv(t *testing.T, ctrl *gomock.Controller, routes *routeServer) *namesrvs {
	ns, err := NewNamesrv(primitive.NewPassthroughResolver([]string{patchNamesrv}), nil)
	require.NoError(t, err)
	nsClient := remote.NewMockRemotingClient(ctrl)
	nsClient.EXPECT().InvokeSync(gomock.Any(), patchNamesrv, gomock.Any()).DoAndReturn(routes.answer).AnyTimes()
	ns.nameSrvClient = nsClient
	return ns
}

// Patch 2: Shutdown wrote the client's closed flag while the consumer's goroutines read it
// in InvokeSync, InvokeAsync and InvokeOneWay. Without the patch -race reports it here.
func TestShutdownWhileRequestsAreSent(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	brokers := remote.NewMockRemotingClient(ctrl)
	brokers.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any()).
		Return(&remote.RemotingCommand{Code: ResSuccess}, nil).AnyTimes()
	brokers.EXPECT().ShutDown()
	c := &rmqClient{
		option:       ClientOptions{ClientIP: "192.0.2.9", InstanceName: "patch2"},
		remoteClient: brokers,
		done:         make(chan struct{}),
	}

	sent := make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			_, err := c.InvokeSync(context.Background(), patchBrokerAddr, remote.NewRemotingCommand(ReqHeartBeat, nil, nil), time.Second)
			if err != nil {
				stopped <- err
				return
			}
			select {
			case <-sent:
			default:
				close(sent)
			}
		}
		stopped <- fmt.Errorf("requests still sent 5 s after Shutdown")
	}()
	<-sent
	c.Shutdown()
	require.Equal(t, ErrServiceState, <-stopped)
}

// subscriber is a consumer of patchTopic that reports each rebalance with the number of
// queues it knew of then.
type subscriber struct {
	mu         sync.Mutex
	queues     int
	rebalanced chan int
}

func (s *subscriber) UpdateTopicSubscribeInfo(_ string, mqs []*primitive.MessageQueue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues = len(mqs)
}

func (s *subscriber) Rebalance() {
	s.mu.Lock()
	queues := s.queues
	s.mu.Unlock()
	select {
	case s.rebalanced <- queues:
	default:
	}
}

func (s *subscriber) SubscriptionDataList() []*SubscriptionData {
	return []*SubscriptionData{{Topic: patchTopic}}
}

func (s *subscriber) PersistConsumerOffset() error                     { return nil }
func (s *subscriber) IsSubscribeTopicNeedUpdate(string) bool           { return false }
func (s *subscriber) RebalanceIfNotPaused()                            {}
func (s *subscriber) IsUnitMode() bool                                 { return false }
func (s *subscriber) GetConsumerRunningInfo(bool) *ConsumerRunningInfo { return nil }
func (s *subscriber) ConsumeMessageDirectly(*primitive.MessageExt, string) *ConsumeMessageDirectlyResult {
	return nil
}
func (s *subscriber) GetcType() string                                     { return "CONSUME_PASSIVELY" }
func (s *subscriber) GetModel() string                                     { return "CLUSTERING" }
func (s *subscriber) GetWhere() string                                     { return "CONSUME_FROM_LAST_OFFSET" }
func (s *subscriber) ResetOffset(string, map[primitive.MessageQueue]int64) {}
func (s *subscriber) GetConsumerStatus(string) *ConsumerStatus             { return nil }

// Patch 5: with RoutePollInterval set, a client re-reads its topics' routes that often, and
// a consumer whose topic's route changed rebalances at once. Upstream, a queue added to the
// topic waited for the 30 s route poll, then for the 20 s rebalance timer.
func TestAConsumerRebalancesAsSoonAsItsTopicsRouteChanges(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	routes := &routeServer{queues: 4}
	ns := newPatchNamesrv(t, ctrl, routes)
	brokers := remote.NewMockRemotingClient(ctrl)
	brokers.EXPECT().InvokeSync(gomock.Any(), patchBrokerAddr, gomock.Any()).
		Return(&remote.RemotingCommand{Code: ResSuccess}, nil).AnyTimes() // heartbeats
	brokers.EXPECT().ShutDown()
	c := &rmqClient{
		option: ClientOptions{
			ClientIP: "192.0.2.9", InstanceName: "patch5", Namesrv: ns,
			RoutePollInterval: 20 * time.Millisecond,
		},
		remoteClient: brokers,
		done:         make(chan struct{}),
	}
	ns.bundleClient = c
	consumer := &subscriber{rebalanced: make(chan int, 1)}
	require.NoError(t, c.RegisterConsumer("patch-group", consumer))
	c.Start()
	defer c.Shutdown()

	waitForRebalance := func(queues int) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case n := <-consumer.rebalanced:
				if n == queues {
					return
				}
			case <-deadline:
				t.Fatalf("no rebalance over %d queues within 5 s", queues)
			}
		}
	}
	waitForRebalance(4)
	routes.setQueues(8)
	waitForRebalance(8)
}

// publisher is a producer of patchTopic that records, for each route it is given, whether
// the name server knew the address of every broker the route names at that moment.
type publisher struct {
	ns        *namesrvs
	addresses []string
}

func (p *publisher) UpdateTopicPublishInfo(_ string, info *TopicPublishInfo) {
	for _, mq := range info.MqList {
		p.addresses = append(p.addresses, p.ns.FindBrokerAddrByName(mq.BrokerName))
	}
}

func (p *publisher) PublishTopicList() []string           { return []string{patchTopic} }
func (p *publisher) IsPublishTopicNeedUpdate(string) bool { return false }
func (p *publisher) IsUnitMode() bool                     { return false }

// Patch 6: when a topic's route changes, the brokers' addresses are stored before producers
// are given the new route. Stored after, a send racing the change could pick a queue of
// the new route, find no address for its broker and fail at once.
func TestAProducerGivenARouteKnowsItsBrokers(t *testing.T) {
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	ns := newPatchNamesrv(t, ctrl, &routeServer{queues: 2})
	c := &rmqClient{option: ClientOptions{Namesrv: ns}}
	ns.bundleClient = c
	producer := &publisher{ns: ns}
	require.NoError(t, c.RegisterProducer("patch-group", producer))

	_, changed, err := ns.UpdateTopicRouteInfo(patchTopic)
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, []string{patchBrokerAddr, patchBrokerAddr}, producer.addresses)
}
