// Package ordering is everything about keyed order on RocketMQ: the ordered producer (the Go
// form of Java's syncSendOrderly), the orderly consumer harness that guards against the Go
// client's sharp edges, and the outbox relay that publishes each key's rows in sequence.
package ordering

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strings"
	"sync"
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
	Logger      *slog.Logger
}

// OrderedProducer sends each message to the queue chosen by hashing its sharding key, with
// SendSync: Java's syncSendOrderly(topic, msg, hashKey). While the topic's queue count is
// stable, one key's messages land on one queue in the order they were sent.
type OrderedProducer struct {
	p   rocketmq.Producer
	sel *queueSelector
	log *slog.Logger
}

// NewOrderedProducer creates and starts a producer.
func NewOrderedProducer(cfg ProducerConfig) (*OrderedProducer, error) {
	if len(cfg.Namesrv) == 0 {
		return nil, errors.New("ordering: producer needs a name server address")
	}
	if cfg.Group == "" {
		return nil, errors.New("ordering: producer needs a group")
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
	sel := &queueSelector{hash: producer.NewHashQueueSelector(), routes: map[string][]primitive.MessageQueue{}}
	opts := []producer.Option{
		producer.WithNameServer(cfg.Namesrv),
		producer.WithGroupName(cfg.Group),
		producer.WithQueueSelector(sel),
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
	return &OrderedProducer{p: p, sel: sel, log: cfg.Logger}, nil
}

// SendOrderly sends m to the queue of its sharding key and waits for the broker. It fails
// unless the broker confirms the message as stored (SEND_OK).
func (op *OrderedProducer) SendOrderly(ctx context.Context, m Message) (SendResult, error) {
	if m.ShardingKey == "" {
		// Without a key the hash selector silently picks a random queue: refuse instead.
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
	out := SendResult{MsgID: res.MsgID, QueueOffset: res.QueueOffset}
	if res.MessageQueue != nil {
		out.Broker = res.MessageQueue.BrokerName
		out.QueueID = res.MessageQueue.QueueId
	}
	if res.OffsetMsgID != "" && out.MsgID == "" {
		out.MsgID = res.OffsetMsgID
	}
	return out, nil
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

// QueueOf names the queue that key's messages on topic go to under the producer's current
// route (the queue SendOrderly picks), and reports false while the producer has no route for
// topic yet (before its first send there).
func (op *OrderedProducer) QueueOf(topic, key string) (string, bool) {
	q, ok := op.sel.queueOf(topic, key)
	if !ok {
		return "", false
	}
	return q.String(), true
}

// SendOrderlyBatch sends msgs, which must all have one topic and go to one queue (the same
// QueueOf), as one batch: the broker stores them together, in this order, or not at all.
// It fails unless the broker confirms them as stored, and also when the route changed since
// the queue was named (the caller groups them again). Each message keeps its sharding key,
// tag, keys and properties. The results give each message its queue offset; their MsgID is
// "<queue offset message id>#<index>" (the client does not return one per message).
func (op *OrderedProducer) SendOrderlyBatch(ctx context.Context, msgs []Message) ([]SendResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	topic := msgs[0].Topic
	q, ok := op.sel.queueOf(topic, msgs[0].ShardingKey)
	if !ok {
		return nil, fmt.Errorf("ordering: no route for %s yet", topic)
	}
	pm := make([]*primitive.Message, len(msgs))
	for i, m := range msgs {
		if m.ShardingKey == "" || m.Topic != topic {
			return nil, errors.New("ordering: SendOrderlyBatch needs one topic and a sharding key on every message")
		}
		if other, _ := op.sel.queueOf(topic, m.ShardingKey); other != q {
			return nil, fmt.Errorf("ordering: batch for %s holds key %s of another queue", q.String(), m.ShardingKey)
		}
		pm[i] = m.primitive()
	}
	if len(pm) == 1 {
		res, err := op.SendOrderly(ctx, msgs[0])
		return []SendResult{res}, err
	}
	pm[0].Queue = &primitive.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueId: q.QueueId}
	res, err := op.p.SendSync(ctx, pm...)
	if err != nil {
		return nil, fmt.Errorf("ordering: batch of %d to %s: %w", len(pm), q.String(), err)
	}
	if res == nil {
		return nil, fmt.Errorf("ordering: batch of %d to %s: no result", len(pm), q.String())
	}
	if res.Status != primitive.SendOK {
		return nil, fmt.Errorf("%w: status %s, batch of %d to %s", ErrNotStored, statusName(res.Status), len(pm), q.String())
	}
	out := make([]SendResult, len(pm))
	for i := range out {
		out[i] = SendResult{MsgID: fmt.Sprintf("%s#%d", res.OffsetMsgID, i), Broker: q.BrokerName, QueueID: q.QueueId, QueueOffset: res.QueueOffset + int64(i)}
	}
	return out, nil
}

// queueSelector is the producer's queue selector: the client's hash selector (Java's
// SelectMessageQueueByHash in Go: FNV-1a of the sharding key modulo the writable queues) for
// a message, and for a batch (which the client sends without its messages' keys) the queue
// SendOrderlyBatch named on its first message. It remembers each topic's route as the
// client last gave it, so that QueueOf answers with the queue a send would pick.
type queueSelector struct {
	hash producer.QueueSelector

	mu     sync.Mutex
	routes map[string][]primitive.MessageQueue
}

func (s *queueSelector) Select(msg *primitive.Message, queues []*primitive.MessageQueue, last string) *primitive.MessageQueue {
	s.remember(msg.Topic, queues)
	if msg.Batch && msg.Queue != nil {
		for _, q := range queues {
			if *q == *msg.Queue {
				return q
			}
		}
		return nil // the route changed since the batch was grouped: the send fails
	}
	return s.hash.Select(msg, queues, last)
}

func (s *queueSelector) remember(topic string, queues []*primitive.MessageQueue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.routes[topic]
	same := len(cur) == len(queues)
	for i := 0; same && i < len(cur); i++ {
		same = cur[i] == *queues[i]
	}
	if same {
		return
	}
	route := make([]primitive.MessageQueue, len(queues))
	for i, q := range queues {
		route[i] = *q
	}
	s.routes[topic] = route
}

// queueOf is the hash selector's choice for key on topic's remembered route.
func (s *queueSelector) queueOf(topic, key string) (primitive.MessageQueue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	route := s.routes[topic]
	if len(route) == 0 || key == "" {
		return primitive.MessageQueue{}, false
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	i := int(h.Sum32()) % len(route)
	if i < 0 {
		i = -i
	}
	return route[i], true
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
