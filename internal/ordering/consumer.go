package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Delivery is one message as the orderly handler sees it.
type Delivery struct {
	Topic          string
	MsgID          string
	Keys           string
	Tag            string
	ShardingKey    string
	Broker         string
	QueueID        int
	QueueOffset    int64
	ReconsumeTimes int32 // the client's in-memory attempt counter: resets on restart and rebalance
	BornAt         time.Time
	Body           []byte
	Properties     map[string]string
}

// Result is what a Handler decides for a delivery.
type Result struct {
	kind  resultKind
	after time.Duration
}

type resultKind int

const (
	resultAck resultKind = iota
	resultRetry
	resultWait
	resultDeadLetter
)

// Ack means the message is done: its offset may be committed.
func Ack() Result { return Result{kind: resultAck} }

// RetryAfter suspends the queue for d and delivers the same message again (0 = the
// consumer's default suspend delay). It spends one of the client's MaxReconsumeTimes
// attempts; when they are exhausted the client moves the message to %DLQ%<group>.
func RetryAfter(d time.Duration) Result { return Result{kind: resultRetry, after: d} }

// Wait suspends the queue for d and delivers the same message again WITHOUT spending one of
// the client's attempts: for waiting on something else (a missing predecessor), not failing.
func Wait(d time.Duration) Result { return Result{kind: resultWait, after: d} }

// DeadLetter hands the message to the client's own dead-lettering now: the client sends it
// back to the broker with delay level -1, the broker stores it in %DLQ%<group>, and only
// then is the offset committed (if the send-back fails the message is retried instead).
func DeadLetter() Result { return Result{kind: resultDeadLetter} }

// IsRetry reports whether r asks for the message again (RetryAfter or Wait).
func (r Result) IsRetry() bool { return r.kind == resultRetry || r.kind == resultWait }

// Handler handles one message of one queue at a time; it is never called concurrently for
// the same queue. It must be idempotent: delivery is at least once.
type Handler func(ctx context.Context, d Delivery) Result

// ConsumerConfig configures an OrderlyConsumer.
type ConsumerConfig struct {
	Namesrv []string
	Group   string
	Topic   string
	Tags    string // tag expression; default "*"
	// MaxReconsumeTimes bounds the client's own retries before it sends the message to
	// %DLQ%<group>. Required (> 0): the client's default -1 means forever in orderly mode.
	// The client calls the handler up to MaxReconsumeTimes+2 times (it compares with >).
	MaxReconsumeTimes int32
	// HandlerTimeout bounds one handler call (the client has none in orderly mode); default 30s.
	HandlerTimeout time.Duration
	// SuspendDelay is how long a queue pauses after RetryAfter(0) or a panic; default 1s.
	// The client's own default retries at once.
	SuspendDelay time.Duration
	// FromFirstOffset starts a group that has no committed offset at the queue's start
	// (default: at its end, the client's default).
	FromFirstOffset bool
	// LockInterval is how often the consumer renews its queue locks at the broker and takes
	// back the ones it lost; default 5s. The client's own 20s left every queue idle for up to
	// 20 s after a broker restart (the broker keeps its locks in memory only).
	LockInterval time.Duration
	Instance     string
	Logger       *slog.Logger
}

// OrderlyConsumer is a push consumer in orderly mode (broker queue locks, one goroutine per
// queue, one message per call) that fixes the Go client's hazards: a handler panic is
// recovered (the client would stall the queue for good), each call is bounded by a deadline,
// retries suspend the queue for an explicit time (the client's default is none),
// ConsumeRetryLater is never returned (in orderly mode the client silently skips such a
// message), and Shutdown waits for the handler in flight (the client does not).
type OrderlyConsumer struct {
	cfg     ConsumerConfig
	handler Handler
	pc      rocketmq.PushConsumer
	log     *slog.Logger

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup
	panics   atomic.Int64
}

// NewOrderlyConsumer creates a consumer; Start begins consumption.
func NewOrderlyConsumer(cfg ConsumerConfig, h Handler) (*OrderlyConsumer, error) {
	switch {
	case len(cfg.Namesrv) == 0:
		return nil, errors.New("ordering: consumer needs a name server address")
	case cfg.Group == "":
		return nil, errors.New("ordering: consumer needs a group")
	case cfg.Topic == "":
		return nil, errors.New("ordering: consumer needs a topic")
	case cfg.MaxReconsumeTimes <= 0:
		return nil, errors.New("ordering: MaxReconsumeTimes must be positive (unbounded retries block a queue forever)")
	case h == nil:
		return nil, errors.New("ordering: consumer needs a handler")
	}
	if cfg.Tags == "" {
		cfg.Tags = "*"
	}
	if cfg.HandlerTimeout <= 0 {
		cfg.HandlerTimeout = 30 * time.Second
	}
	if cfg.SuspendDelay <= 0 {
		cfg.SuspendDelay = time.Second
	}
	if cfg.LockInterval <= 0 {
		cfg.LockInterval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	from := consumer.ConsumeFromLastOffset
	if cfg.FromFirstOffset {
		from = consumer.ConsumeFromFirstOffset
	}
	opts := []consumer.Option{
		consumer.WithNameServer(cfg.Namesrv),
		consumer.WithGroupName(cfg.Group),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumerOrder(true),
		consumer.WithConsumeMessageBatchMaxSize(1),
		consumer.WithMaxReconsumeTimes(cfg.MaxReconsumeTimes),
		consumer.WithConsumeFromWhere(from),
		consumer.WithSuspendCurrentQueueTimeMillis(cfg.SuspendDelay),
		consumer.WithRebalanceLockInterval(cfg.LockInterval),
	}
	opts = append(opts, consumer.WithInstance(instanceName(cfg.Instance, cfg.Group)))
	pc, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return nil, fmt.Errorf("ordering: new consumer: %w", err)
	}
	c := &OrderlyConsumer{cfg: cfg, handler: h, pc: pc, log: cfg.Logger.With("group", cfg.Group, "topic", cfg.Topic)}
	if err := pc.Subscribe(cfg.Topic, consumer.MessageSelector{Type: consumer.TAG, Expression: cfg.Tags}, c.consume); err != nil {
		return nil, fmt.Errorf("ordering: subscribe %s: %w", cfg.Topic, err)
	}
	return c, nil
}

// Start begins consuming.
func (c *OrderlyConsumer) Start() error {
	if err := c.pc.Start(); err != nil {
		return fmt.Errorf("ordering: start consumer %s: %w", c.cfg.Group, err)
	}
	return nil
}

// Panics returns how many handler panics were recovered.
func (c *OrderlyConsumer) Panics() int64 { return c.panics.Load() }

// Shutdown stops taking messages, waits (until ctx is done) for the handler calls in flight,
// then shuts the client down, which persists offsets and unlocks the queues.
func (c *OrderlyConsumer) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.inflight.Wait(); close(done) }()
	var waitErr error
	select {
	case <-done:
	case <-ctx.Done():
		waitErr = fmt.Errorf("ordering: handler still running at shutdown: %w", ctx.Err())
	}
	return errors.Join(waitErr, c.pc.Shutdown())
}

// consume is the client callback. It is called with one message (batch size 1).
func (c *OrderlyConsumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	octx, _ := primitive.GetOrderlyCtx(ctx)
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		// Leave the message for the next owner of the queue (never ConsumeRetryLater, which
		// skips it), without spending an attempt.
		for _, m := range msgs {
			m.ReconsumeTimes--
		}
		setSuspend(octx, c.cfg.SuspendDelay)
		return consumer.SuspendCurrentQueueAMoment, nil
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	defer c.inflight.Done()

	// Batch size is 1; a longer batch is handled message by message and retried whole.
	for _, m := range msgs {
		res := c.handleOne(m)
		d := res.after
		if d <= 0 {
			d = c.cfg.SuspendDelay
		}
		switch res.kind {
		case resultAck:
			continue
		case resultWait:
			// The client increments ReconsumeTimes on every suspend and dead-letters the
			// message past MaxReconsumeTimes; a wait is not a failure, so undo that in advance.
			m.ReconsumeTimes--
			setSuspend(octx, d)
			return consumer.SuspendCurrentQueueAMoment, nil
		case resultDeadLetter:
			// Past the limit the client sends the message back with delay level -1: the
			// broker stores it in %DLQ%<group>, and the offset is committed after that.
			m.ReconsumeTimes = c.cfg.MaxReconsumeTimes + 1
			setSuspend(octx, d)
			return consumer.SuspendCurrentQueueAMoment, nil
		default:
			setSuspend(octx, d)
			return consumer.SuspendCurrentQueueAMoment, nil
		}
	}
	return consumer.ConsumeSuccess, nil
}

func setSuspend(octx *primitive.ConsumeOrderlyContext, d time.Duration) {
	if octx == nil {
		return
	}
	ms := int(d / time.Millisecond)
	if ms < 1 {
		ms = 1
	}
	octx.SuspendCurrentQueueTimeMillis = ms
}

func (c *OrderlyConsumer) handleOne(m *primitive.MessageExt) (res Result) {
	d := toDelivery(m)
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.HandlerTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			c.panics.Add(1)
			c.log.Error("handler panicked; the queue is suspended and the message retried",
				"panic", fmt.Sprint(p), "msg_id", d.MsgID, "queue", d.QueueID, "offset", d.QueueOffset,
				"stack", string(debug.Stack()))
			res = RetryAfter(c.cfg.SuspendDelay)
		}
	}()
	return c.handler(ctx, d)
}

func toDelivery(m *primitive.MessageExt) Delivery {
	d := Delivery{
		Topic:          m.Topic,
		MsgID:          m.MsgId,
		Keys:           m.GetKeys(),
		Tag:            m.GetTags(),
		ShardingKey:    m.GetShardingKey(),
		QueueOffset:    m.QueueOffset,
		ReconsumeTimes: m.ReconsumeTimes,
		BornAt:         time.UnixMilli(m.BornTimestamp),
		Body:           m.Body,
		Properties:     m.GetProperties(),
	}
	if m.Queue != nil {
		d.Broker = m.Queue.BrokerName
		d.QueueID = m.Queue.QueueId
	}
	return d
}

// QueueLabel formats a queue for logs and metrics.
func (d Delivery) QueueLabel() string { return d.Broker + "/" + strconv.Itoa(d.QueueID) }
