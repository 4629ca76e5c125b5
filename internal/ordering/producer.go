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
	Logger      *slog.Logger
}

// OrderedProducer sends each message to the queue chosen by hashing its sharding key, with
// SendSync: Java's syncSendOrderly(topic, msg, hashKey). While the topic's queue count is
// stable, one key's messages land on one queue in the order they were sent.
type OrderedProducer struct {
	p   rocketmq.Producer
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := []producer.Option{
		producer.WithNameServer(cfg.Namesrv),
		producer.WithGroupName(cfg.Group),
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
		producer.WithSendMsgTimeout(cfg.SendTimeout),
		producer.WithRetry(cfg.Retries),
	}
	opts = append(opts, producer.WithInstanceName(instanceName(cfg.Instance, cfg.Group)))
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		return nil, fmt.Errorf("ordering: new producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("ordering: start producer: %w", err)
	}
	return &OrderedProducer{p: p, log: cfg.Logger}, nil
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
	res, err := op.p.SendSync(ctx, msg)
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
