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

	retry "github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
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
	// FirstAtEnd is set on the messages of the first batch this consumer delivers from a
	// queue that StartAtEnd started at its end (again on each delivery of that batch, until
	// it is acknowledged): the first messages of a queue whose earlier ones were never read.
	FirstAtEnd bool
}

// Handler handles a batch of messages of one queue, in queue order; it is never called
// concurrently for the same queue. nil acknowledges the whole batch (the offset moves past
// it); an error pauses the queue for the suspend delay and delivers the same batch again.
// Delivery is at least once: a handler must be idempotent. A handler must not fail for a
// message's own sake (record a bad message and acknowledge it): an error is for "cannot work
// right now", such as an unreachable database, and is retried for as long as it lasts.
type Handler func(ctx context.Context, batch []Delivery) error

// ConsumerConfig configures an OrderlyConsumer.
type ConsumerConfig struct {
	Namesrv []string
	Group   string
	Topic   string
	Tags    string // tag expression; default "*"
	// BatchSize is how many messages of one queue a handler call gets at most (default 32).
	BatchSize int
	// Buffer bounds how many messages the client keeps pulled ahead, across all the queues
	// this consumer holds (default 2048; also at most Buffer/64 MiB), so draining a large
	// backlog does not grow memory. The client splits it evenly over its queues.
	Buffer int
	// HandlerTimeout bounds one handler call (the client has none in orderly mode); default 30s.
	HandlerTimeout time.Duration
	// SuspendDelay is how long a queue pauses after a handler error or panic; default 1s.
	// The client's own default retries at once.
	SuspendDelay time.Duration
	// FromFirstOffset starts a group that has no committed offset at the queue's start
	// (default: at its end, the client's default). StartAtEnd, when set, decides instead.
	FromFirstOffset bool
	// StartAtEnd, when set, decides where each queue of the topic starts that the group has
	// no committed offset on: at its end (only what is stored from then on) when it answers
	// true, else at its first message. It is given the queue ("<broker>/<id>") and the
	// topic's queues as the consumer read them from the name server when it started (each
	// start attempt reads them again), and is asked whenever the consumer takes such a queue;
	// an error leaves the queue untaken until the next rebalance. A queue it starts at its
	// end has that start committed as the group's offset at once (client patch 17: a restart
	// resumes it there), and the messages of the first batch then delivered from it carry
	// FirstAtEnd. The group's retry topic always starts at its first message.
	StartAtEnd func(queue string, atStart []string) (bool, error)
	// PullWait is how long a queue waits, after a pull that brought what the queue held,
	// before it pulls again: at moderate rates a few messages then gather per pull instead of
	// one (each pull costs a request at the broker and here, whatever it brings). A pull that
	// left messages behind pulls again at once, so a backlog drains at full speed, and a
	// queue whose pull waits at the broker (nothing new) gets the next message as soon as it
	// is stored. Default 0: pull again at once (the client's default). At most 1 s.
	PullWait time.Duration
	// RoutePoll is how often the consumer re-reads the topic's route from the name server;
	// a changed route (queues added, a broker gone or back) makes it rebalance at once.
	// Default 1s (the client's own is 30 s, plus a 20 s rebalance timer).
	RoutePoll time.Duration
	// LockInterval is how often the consumer renews its queue locks at the broker and takes
	// back the ones it lost; default 5s. The client's own 20s left every queue idle for up to
	// 20 s after a broker restart (the broker keeps its locks in memory only).
	LockInterval time.Duration
	// StartRetry is the first wait after a start that failed (the broker unreachable),
	// doubling up to StartRetryMax; defaults 1s and 30s.
	StartRetry    time.Duration
	StartRetryMax time.Duration
	Instance      string
	// Credentials sign every request (the broker's access control); zero: unsigned. The
	// group's user must be allowed to subscribe to the topic and the group (whose retry
	// topic the client subscribes to as well), and, for a group that starts at the end of
	// the topic, to get from it: the consumer asks each queue's last offset (GET_MAX_OFFSET),
	// which the broker authorizes as Get.
	Credentials Credentials
	Logger      *slog.Logger
}

// OrderlyConsumer is a push consumer in orderly mode (broker queue locks, one goroutine per
// queue, batches of one queue's messages in order) that fixes the Go client's hazards: a
// handler panic is recovered (the client would stall the queue for good), each call is
// bounded by a deadline, a failed batch suspends the queue for an explicit time (the
// client's default is none), ConsumeRetryLater is never returned (in orderly mode the client
// silently skips such a message), the client never dead-letters a message on its own (its
// attempt counter lives in memory and would send a message to the DLQ during a long database
// outage), the pull cache is bounded, and Stop waits for the handler in flight (the
// client does not).
//
// Start returns at once and connects in the background, retrying until the broker can be
// reached: a process that consumes is not held hostage by a broker that is down when it
// starts (Running and Err say how it stands).
type OrderlyConsumer struct {
	cfg     ConsumerConfig
	handler Handler
	opts    []consumer.Option
	log     *slog.Logger

	mu       sync.Mutex
	pc       rocketmq.PushConsumer // set once a start succeeded
	lastErr  error
	closing  bool
	connect  *lifecycle.Runner // connects until it succeeds or Stop
	stopped  chan struct{}     // closed once Stop has shut the client down
	inflight sync.WaitGroup
	panics   atomic.Int64
	running  atomic.Bool

	// For StartAtEnd: the topic's queues read by the start attempt, the queues this process
	// started at their end, and those of them whose first batch is not acknowledged yet.
	startMu      sync.Mutex
	atStart      []string
	startedAtEnd map[string]bool
	firstPending map[string]bool
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
	case h == nil:
		return nil, errors.New("ordering: consumer needs a handler")
	case cfg.PullWait < 0 || cfg.PullWait > time.Second:
		return nil, fmt.Errorf("ordering: consumer pull wait must be 0–1s, got %s", cfg.PullWait)
	}
	if cfg.Tags == "" {
		cfg.Tags = "*"
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 32
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 2048
	}
	if cfg.HandlerTimeout <= 0 {
		cfg.HandlerTimeout = 30 * time.Second
	}
	if cfg.SuspendDelay <= 0 {
		cfg.SuspendDelay = time.Second
	}
	if cfg.RoutePoll <= 0 {
		cfg.RoutePoll = time.Second
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
		consumer.WithConsumeMessageBatchMaxSize(cfg.BatchSize),
		consumer.WithPullBatchSize(int32(cfg.BatchSize)), //nolint:gosec // G115: a batch of messages; the notifier allows 1–1024 (CONSUME_BATCH)
		// The client derives its per-queue limits from these at every rebalance (its
		// per-queue options alone are overwritten).
		consumer.WithPullThresholdForTopic(cfg.Buffer),
		consumer.WithPullThresholdSizeForTopic(max(1, cfg.Buffer/64)), // MiB
		// -1 is "unlimited" in orderly mode: a batch that fails is retried until the handler
		// can take it; the client never sends it to the DLQ by itself.
		consumer.WithMaxReconsumeTimes(-1),
		consumer.WithConsumeFromWhere(from),
		consumer.WithSuspendCurrentQueueTimeMillis(cfg.SuspendDelay),
		consumer.WithRebalanceLockInterval(cfg.LockInterval),
		consumer.WithRoutePollInterval(cfg.RoutePoll),
		consumer.WithPullInterval(cfg.PullWait), // after a pull that left nothing behind only
	}
	if !cfg.Credentials.IsZero() {
		opts = append(opts, consumer.WithCredentials(cfg.Credentials.primitive()))
	}
	opts = append(opts, consumer.WithInstance(instanceName(cfg.Instance, cfg.Group)))
	if cfg.StartRetry <= 0 {
		cfg.StartRetry = time.Second
	}
	if cfg.StartRetryMax < cfg.StartRetry {
		cfg.StartRetryMax = max(cfg.StartRetry, 30*time.Second)
	}
	c := &OrderlyConsumer{cfg: cfg, handler: h, log: cfg.Logger.With("group", cfg.Group, "topic", cfg.Topic),
		lastErr: errors.New("not started"), stopped: make(chan struct{}),
		startedAtEnd: map[string]bool{}, firstPending: map[string]bool{}}
	if cfg.StartAtEnd != nil {
		opts = append(opts, consumer.WithQueueStart(c.queueStart))
	}
	c.opts = opts
	c.connect = lifecycle.NewRunner(c.connectLoop)
	return c, nil
}

// queueStart is the client's QueueStart (client patch 17): where a queue without a committed
// offset starts, as StartAtEnd says for the topic's queues.
func (c *OrderlyConsumer) queueStart(mq primitive.MessageQueue) (consumer.ConsumeFromWhere, error) {
	if mq.Topic != c.cfg.Topic {
		return consumer.ConsumeFromFirstOffset, nil // the group's retry topic
	}
	q := Queue{Broker: mq.BrokerName, ID: mq.QueueId}.String()
	c.startMu.Lock()
	atStart := c.atStart
	c.startMu.Unlock()
	end, err := c.cfg.StartAtEnd(q, atStart)
	if err != nil {
		c.log.Warn("cannot tell where a queue without an offset starts; it is taken at a later rebalance", "queue", q, "err", err)
		return 0, fmt.Errorf("ordering: where queue %s starts: %w", q, err)
	}
	if !end {
		return consumer.ConsumeFromFirstOffset, nil
	}
	c.startMu.Lock()
	defer c.startMu.Unlock()
	// The client asks again before the queue's first pull, unless the broker has the start
	// committed by then: still the same start, and the same first batch.
	if !c.startedAtEnd[q] {
		c.startedAtEnd[q], c.firstPending[q] = true, true
	}
	return consumer.ConsumeFromLastOffset, nil
}

// firstAtEnd reports whether a batch of queue q is the first one since StartAtEnd started q
// at its end; acknowledged says that batch is done with.
func (c *OrderlyConsumer) firstAtEnd(q string, acknowledged bool) bool {
	if c.cfg.StartAtEnd == nil {
		return false
	}
	c.startMu.Lock()
	defer c.startMu.Unlock()
	first := c.firstPending[q]
	if acknowledged {
		delete(c.firstPending, q)
	}
	return first
}

// Start begins consuming in the background: it returns at once, and connects (creating the
// client, subscribing, starting it) until that succeeds or Stop is called, waiting
// StartRetry after the first failure, doubling up to StartRetryMax.
func (c *OrderlyConsumer) Start(ctx context.Context) error {
	if err := c.connect.Start(ctx); err != nil {
		return fmt.Errorf("ordering: consumer: %w", err)
	}
	return nil
}

// Started is closed once Start has set the consumer connecting.
func (c *OrderlyConsumer) Started() <-chan struct{} { return c.connect.Started() }

// Stopped is closed once Stop has shut the client down.
func (c *OrderlyConsumer) Stopped() <-chan struct{} { return c.stopped }

// connectLoop is Start's background loop; it returns once connected, or when ctx ends.
func (c *OrderlyConsumer) connectLoop(ctx context.Context) error {
	policy := retry.Policy{Base: c.cfg.StartRetry, Max: c.cfg.StartRetryMax}
	for attempt := 1; ; attempt++ {
		err := c.tryStart()
		c.mu.Lock()
		c.lastErr = err
		c.mu.Unlock()
		if err == nil {
			c.running.Store(true)
			if attempt > 1 {
				c.log.Info("consumer started", "attempts", attempt)
			}
			return nil
		}
		wait := policy.Delay(attempt, nil)
		c.log.Warn("consumer cannot start yet (broker unreachable?); retrying", "in", wait, "attempt", attempt, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// tryStart makes one attempt: a client of its own each time (a client whose start failed is
// shut down and not reused). It holds no lock while it talks to the name server (a start
// can take seconds to fail), so Err answers meanwhile.
func (c *OrderlyConsumer) tryStart() error {
	if c.cfg.StartAtEnd != nil {
		queues, err := c.readQueues()
		if err != nil {
			return err
		}
		c.startMu.Lock()
		c.atStart = queues
		c.startMu.Unlock()
	}
	pc, err := rocketmq.NewPushConsumer(c.opts...)
	if err != nil {
		return fmt.Errorf("ordering: new consumer: %w", err)
	}
	if err := pc.Subscribe(c.cfg.Topic, consumer.MessageSelector{Type: consumer.TAG, Expression: c.cfg.Tags}, c.consume); err != nil {
		_ = pc.Shutdown()
		return fmt.Errorf("ordering: subscribe %s: %w", c.cfg.Topic, err)
	}
	if err := pc.Start(); err != nil {
		_ = pc.Shutdown()
		return fmt.Errorf("ordering: start consumer %s: %w", c.cfg.Group, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pc = pc
	return nil
}

// readQueues reads the topic's queues from the name server, for StartAtEnd.
func (c *OrderlyConsumer) readQueues() ([]string, error) {
	adm, err := NewAdmin(c.cfg.Namesrv, c.cfg.Credentials)
	if err != nil {
		return nil, err
	}
	defer adm.Close() //nolint:errcheck // a client of this read only; a failed close loses nothing
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mqs, err := adm.FetchPublishMessageQueues(ctx, c.cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("ordering: queues of %s: %w", c.cfg.Topic, err)
	}
	queues := make([]string, len(mqs))
	for i, mq := range mqs {
		queues[i] = Queue{Broker: mq.BrokerName, ID: mq.QueueId}.String()
	}
	return queues, nil
}

// Running reports whether the consumer has started (it is then consuming whatever queues
// the broker assigns it).
func (c *OrderlyConsumer) Running() bool { return c.running.Load() }

// Err returns nil once the consumer runs, else why it does not yet.
func (c *OrderlyConsumer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pc != nil {
		return nil
	}
	return fmt.Errorf("consumer not started: %w", c.lastErr)
}

// Assignment reports how many of the topic's queues this consumer holds (pulls from, under
// the broker's lock) and how many the topic has, as the consumer last read its route; zeros
// before it started. Across a group's consumers the held queues add up to the topic's once
// the rebalance settled: a queue a consumer was given but could not take (the broker refused
// its lock or its start offset) is held by nobody, and nothing is consumed from it.
func (c *OrderlyConsumer) Assignment() (held, all int) {
	c.mu.Lock()
	pc := c.pc
	c.mu.Unlock()
	if pc == nil {
		return 0, 0
	}
	return pc.Assignment(c.cfg.Topic)
}

// Panics returns how many handler panics were recovered.
func (c *OrderlyConsumer) Panics() int64 { return c.panics.Load() }

// Stop stops taking messages, waits (until ctx is done) for the handler calls in flight,
// then shuts the client down, which persists offsets and unlocks the queues. A second Stop
// returns nil at once.
func (c *OrderlyConsumer) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing = true
	c.mu.Unlock()
	// A start attempt in flight ends before the client is looked at (it gives up within the
	// client's request timeouts).
	if err := c.connect.Stop(ctx); err != nil {
		return fmt.Errorf("ordering: consumer still starting at shutdown: %w", err)
	}
	defer close(c.stopped)
	c.mu.Lock()
	pc := c.pc
	c.mu.Unlock()
	if pc == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { c.inflight.Wait(); close(done) }()
	var waitErr error
	select {
	case <-done:
	case <-ctx.Done():
		waitErr = fmt.Errorf("ordering: handler still running at shutdown: %w", ctx.Err())
	}
	return errors.Join(waitErr, pc.Shutdown())
}

// consume is the client callback: one batch of one queue.
func (c *OrderlyConsumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	octx, _ := primitive.GetOrderlyCtx(ctx)
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		// Leave the batch for the next owner of the queue (never ConsumeRetryLater, which
		// skips it).
		setSuspend(octx, c.cfg.SuspendDelay)
		return consumer.SuspendCurrentQueueAMoment, nil
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	defer c.inflight.Done()

	batch := make([]Delivery, len(msgs))
	for i, m := range msgs {
		batch[i] = toDelivery(m)
	}
	first := c.firstAtEnd(batch[0].QueueLabel(), false)
	for i := range batch {
		batch[i].FirstAtEnd = first
	}
	if err := c.handle(batch); err != nil {
		c.log.Warn("batch not taken; the queue pauses and it comes again", "queue", batch[0].QueueLabel(),
			"offset", batch[0].QueueOffset, "messages", len(batch), "in", c.cfg.SuspendDelay, "err", err)
		setSuspend(octx, c.cfg.SuspendDelay)
		return consumer.SuspendCurrentQueueAMoment, nil
	}
	c.firstAtEnd(batch[0].QueueLabel(), true)
	return consumer.ConsumeSuccess, nil
}

func setSuspend(octx *primitive.ConsumeOrderlyContext, d time.Duration) {
	if octx == nil {
		return
	}
	octx.SuspendCurrentQueueTimeMillis = max(int(d/time.Millisecond), 1)
}

func (c *OrderlyConsumer) handle(batch []Delivery) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.HandlerTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			c.panics.Add(1)
			c.log.Error("handler panicked; the queue is suspended and the batch comes again",
				"panic", fmt.Sprint(p), "queue", batch[0].QueueLabel(), "offset", batch[0].QueueOffset,
				"stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return c.handler(ctx, batch)
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
