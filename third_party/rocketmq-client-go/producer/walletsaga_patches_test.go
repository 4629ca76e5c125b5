package producer

// Tests of walletsaga's patch 11 to the producer (see WALLETSAGA-PATCHES.md at the module's
// root). The client and name server are the module's mocks.

import (
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"

	"github.com/apache/rocketmq-client-go/v2/internal"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

func patchPublishInfo(queues int) *internal.TopicPublishInfo {
	info := &internal.TopicPublishInfo{HaveTopicRouterInfo: true}
	for i := 0; i < queues; i++ {
		info.MqList = append(info.MqList, &primitive.MessageQueue{Topic: topic, BrokerName: "broker-a", QueueId: i})
	}
	return info
}

func queueIDs(mqs []*primitive.MessageQueue) []int {
	ids := make([]int, len(mqs))
	for i, mq := range mqs {
		ids[i] = mq.QueueId
	}
	return ids
}

// Patch 11: PublishMessageQueues returns the queues the producer selects among, as its
// route poll keeps them, reading the route from the name server when it has none yet.
func TestPublishMessageQueuesFollowsTheProducersRoute(t *testing.T) {
	// An instance name of its own: the package's other tests leave a client with another
	// name server registered under the default one.
	p, err := NewDefaultProducer(
		WithNsResolver(primitive.NewPassthroughResolver([]string{"192.0.2.1:9876"})),
		WithInstanceName("patch11"),
	)
	require.NoError(t, err)
	ctrl := gomock.NewController(t)
	defer ctrl.Finish()
	namesrv := internal.NewMockNamesrvs(ctrl)
	client := internal.NewMockRMQClient(ctrl)
	client.SetNameSrv(namesrv)
	p.client = client

	// No route yet: the producer reads it, and the client gives it to the producer.
	route := &internal.TopicRouteData{}
	namesrv.EXPECT().UpdateTopicRouteInfo(topic).Return(route, true, nil)
	client.EXPECT().UpdatePublishInfo(topic, route, true).Do(func(string, *internal.TopicRouteData, bool) {
		p.UpdateTopicPublishInfo(topic, patchPublishInfo(4))
	})
	require.Equal(t, []int{0, 1, 2, 3}, queueIDs(p.PublishMessageQueues(topic)))

	// The route poll gives the producer a route with more queues: no name server request.
	p.UpdateTopicPublishInfo(topic, patchPublishInfo(8))
	mqs := p.PublishMessageQueues(topic)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, queueIDs(mqs))

	// The caller gets copies: changing them changes nothing the producer selects from.
	mqs[0].QueueId = 99
	require.Equal(t, 0, p.PublishMessageQueues(topic)[0].QueueId)
}
