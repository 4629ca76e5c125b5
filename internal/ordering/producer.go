// Package ordering is everything about keyed order on RocketMQ: the ordered producer (the Go
// form of Java's syncSendOrderly), the orderly consumer harness that guards against the Go
// client's sharp edges, and the outbox relay that publishes each key's rows in sequence.
package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Message is what the ordered producer sends.
type Message struct {
	Topic       string
	ShardingKey string // required: the key whose messages must stay in order (user id)
	Tag         string
	Keys        []string // indexed by the broker: mqadmin queryMsgByKey finds them
	Body        []byte
	Properties  map[string]string
}

// SendResult is where the broker stored a message.
type SendResult struct {
	MsgID       string
	Broker      string
	QueueID     int
	QueueOffset int64
}

// ErrNotStored is returned when the broker answered but did not confirm the message as stored
// (SendResult.Status other than SEND_OK, e.g. a flush or slave timeout). The message may or may
// not have been stored: the caller retries, and consumers deduplicate.
var ErrNotStored = errors.New("ordering: broker did not confirm the message as stored")

// ProducerConfig configures an OrderedProducer.
type ProducerConfig struct {
	Namesrv     []string
	Group       string        // producer group
	SendTimeout time.Duration // per attempt; default 3s
	Retries     int           // client retries on the same queue; default 2
	Instance    string        // instance name; default unique per producer (see instanceName)
	// RoutePoll is how often the producer re-reads its topics' routes from the name server,
	// so added queues and gone brokers are used or avoided soon; default 1s (the client's
	// own is 30 s).
	RoutePoll time.Duration
	// Credentials sign every request (the broker's access control); zero: unsigned.
	Credentials Credentials
	// Hash is how a sharding key picks its queue: HashJava (the default) puts a key where a
	// Java producer's syncSendOrderly puts it; HashFNV where the Go client's own hash
	// selector does.
	Hash   KeyHash
	Logger *slog.Logger
}

// OrderedProducer sends each message to the queue chosen by hashing its sharding key, with
// SendSync: Java's syncSendOrderly(topic, msg, hashKey). While the topic's queue count is
// stable, one key's messages land on one queue in the order they were sent.
type OrderedProducer struct {
	p    rocketmq.Producer
	hash KeyHash
	log  *slog.Logger
}

// NewOrderedProducer creates and starts a producer.
func NewOrderedProducer(cfg ProducerConfig) (*OrderedProducer, error) {
	if len(cfg.Namesrv) == 0 {
		return nil, errors.New("ordering: producer needs a name server address")
	}
	if cfg.Group == "" {
		return nil, errors.New("ordering: producer needs a group")
	}
	hash, err := ParseKeyHash(string(cfg.Hash))
	if err != nil {
		return nil, err
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 3 * time.Second
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 2
	}
	if cfg.RoutePoll <= 0 {
		cfg.RoutePoll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := []producer.Option{
		producer.WithNameServer(cfg.Namesrv),
		producer.WithGroupName(cfg.Group),
		producer.WithQueueSelector(queueSelector{hash: hash}),
		producer.WithSendMsgTimeout(cfg.SendTimeout),
		producer.WithRetry(cfg.Retries),
		producer.WithRoutePollInterval(cfg.RoutePoll),
	}
	if !cfg.Credentials.IsZero() {
		opts = append(opts, producer.WithCredentials(cfg.Credentials.primitive()))
	}
	opts = append(opts, producer.WithInstanceName(instanceName(cfg.Instance, cfg.Group)))
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		return nil, fmt.Errorf("ordering: new producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("ordering: start producer: %w", err)
	}
	return &OrderedProducer{p: p, hash: hash, log: cfg.Logger}, nil
}

// Hash is how the producer hashes sharding keys.
func (op *OrderedProducer) Hash() KeyHash { return op.hash }

// SendOrderly sends m to the queue of its sharding key and waits for the broker. It fails
// unless the broker confirms the message as stored (SEND_OK).
func (op *OrderedProducer) SendOrderly(ctx context.Context, m Message) (SendResult, error) {
	if m.ShardingKey == "" {
		// Without a key every message would go to one queue: refuse instead.
		return SendResult{}, errors.New("ordering: SendOrderly needs a sharding key")
	}
	if m.Topic == "" {
		return SendResult{}, errors.New("ordering: SendOrderly needs a topic")
	}
	res, err := op.p.SendSync(ctx, m.primitive())
	if err != nil {
		return SendResult{}, fmt.Errorf("ordering: send to %s (key %s): %w", m.Topic, m.ShardingKey, err)
	}
	if res == nil {
		return SendResult{}, fmt.Errorf("ordering: send to %s (key %s): no result", m.Topic, m.ShardingKey)
	}
	if res.Status != primitive.SendOK {
		return SendResult{}, fmt.Errorf("%w: status %s, msg id %s", ErrNotStored, statusName(res.Status), res.MsgID)
	}
	return oneResult(res), nil
}

func oneResult(res *primitive.SendResult) SendResult {
	out := SendResult{MsgID: res.MsgID, QueueOffset: res.QueueOffset}
	if res.MessageQueue != nil {
		out.Broker = res.MessageQueue.BrokerName
		out.QueueID = res.MessageQueue.QueueId
	}
	if res.OffsetMsgID != "" && out.MsgID == "" {
		out.MsgID = res.OffsetMsgID
	}
	return out
}

func (m Message) primitive() *primitive.Message {
	msg := primitive.NewMessage(m.Topic, m.Body)
	msg.WithShardingKey(m.ShardingKey)
	if m.Tag != "" {
		msg.WithTag(m.Tag)
	}
	if len(m.Keys) > 0 {
		msg.WithKeys(m.Keys)
	}
	for k, v := range m.Properties {
		msg.WithProperty(k, v)
	}
	return msg
}

// publishLister is the vendored client's producer with its publish list exposed
// (third_party/rocketmq-client-go, patch 11).
type publishLister interface {
	PublishMessageQueues(topic string) []*primitive.MessageQueue
}

// Route returns topic's writable queues as the producer's selector sees them now (the
// client re-reads the route every RoutePoll), in the order it indexes them, with the
// producer's hash. The first call for a topic reads its route from the name server. It fails
// when the topic has no writable queue.
func (op *OrderedProducer) Route(_ context.Context, topic string) (Route, error) {
	pl, ok := op.p.(publishLister)
	if !ok {
		return Route{}, errors.New("ordering: the RocketMQ client does not expose its publish list")
	}
	mqs := pl.PublishMessageQueues(topic)
	if len(mqs) == 0 {
		return Route{}, fmt.Errorf("ordering: topic %s has no route with a writable queue", topic)
	}
	qs := make([]Queue, len(mqs))
	for i, mq := range mqs {
		qs[i] = Queue{Broker: mq.BrokerName, ID: mq.QueueId}
	}
	slices.SortStableFunc(qs, javaOrder)
	return Route{Queues: qs, Hash: op.hash}, nil
}

// SendBatch sends msgs, all of one topic and each with its sharding key, to queue q as one
// batch: the broker stores them together, in this order, or not at all. It fails unless the
// broker confirms them as stored, and when q is not (or no longer) among the topic's writable
// queues. The results give each message its queue offset; their MsgID is "<queue offset
// message id>#<index>" for a batch of several (the client does not return one per message).
func (op *OrderedProducer) SendBatch(ctx context.Context, q Queue, msgs []Message) ([]SendResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	topic := msgs[0].Topic
	pm := make([]*primitive.Message, len(msgs))
	for i, m := range msgs {
		if m.ShardingKey == "" || m.Topic == "" || m.Topic != topic {
			return nil, errors.New("ordering: SendBatch needs one topic and a sharding key on every message")
		}
		pm[i] = m.primitive()
	}
	// The selector sends a message that names its queue there (see queueSelector).
	pm[0].Queue = &primitive.MessageQueue{Topic: topic, BrokerName: q.Broker, QueueId: q.ID}
	res, err := op.p.SendSync(ctx, pm...)
	if err != nil {
		return nil, fmt.Errorf("ordering: batch of %d to %s %s: %w", len(pm), topic, q, err)
	}
	if res == nil {
		return nil, fmt.Errorf("ordering: batch of %d to %s %s: no result", len(pm), topic, q)
	}
	if res.Status != primitive.SendOK {
		return nil, fmt.Errorf("%w: status %s, batch of %d to %s %s", ErrNotStored, statusName(res.Status), len(pm), topic, q)
	}
	if len(pm) == 1 {
		return []SendResult{oneResult(res)}, nil
	}
	out := make([]SendResult, len(pm))
	for i := range out {
		out[i] = SendResult{MsgID: fmt.Sprintf("%s#%d", res.OffsetMsgID, i), Broker: q.Broker, QueueID: q.ID, QueueOffset: res.QueueOffset + int64(i)}
	}
	return out, nil
}

// queueSelector is the producer's queue selector. A message that names its queue (the first
// of a SendBatch, which the client sends without its messages' keys) goes there, or nowhere
// when the route no longer has that queue (the send fails). Any other message goes to the
// queue its sharding key hashes to among the writable queues in the Java client's order
// (see javaOrder).
type queueSelector struct{ hash KeyHash }

func (s queueSelector) Select(msg *primitive.Message, queues []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	if len(queues) == 0 {
		return nil
	}
	if msg.Queue != nil {
		for _, q := range queues {
			if q.BrokerName == msg.Queue.BrokerName && q.QueueId == msg.Queue.QueueId {
				return q
			}
		}
		return nil
	}
	queues = inJavaOrder(queues)
	return queues[s.hash.Slot(msg.GetShardingKey(), len(queues))]
}

// inJavaOrder returns queues in javaOrder: as they are when already so (the client's own
// order, for ASCII broker names), else a sorted copy.
func inJavaOrder(queues []*primitive.MessageQueue) []*primitive.MessageQueue {
	cmp := func(a, b *primitive.MessageQueue) int {
		return javaOrder(Queue{Broker: a.BrokerName, ID: a.QueueId}, Queue{Broker: b.BrokerName, ID: b.QueueId})
	}
	if slices.IsSortedFunc(queues, cmp) {
		return queues
	}
	sorted := slices.Clone(queues)
	slices.SortStableFunc(sorted, cmp)
	return sorted
}

// Shutdown stops the producer.
func (op *OrderedProducer) Shutdown() error { return op.p.Shutdown() }

func statusName(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	case primitive.SendUnknownError:
		return "UNKNOWN_ERROR"
	}
	return strings.TrimSpace(fmt.Sprintf("status(%d)", s))
}

var instanceSeq atomic.Int64

// instanceName returns name, or a name unique in this process. The client keeps one
// connection object per "IP@instance" for the whole process and refuses a second one with
// other name servers, so two clients in one process (tests, or one binary talking to two
// clusters) must not share the default instance name.
func instanceName(name, group string) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("%s-%d-%d", group, os.Getpid(), instanceSeq.Add(1))
}
