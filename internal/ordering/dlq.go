package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

// DLQTopic is where the broker stores the dead letters of a consumer group.
func DLQTopic(group string) string { return "%DLQ%" + group }

// DLQWatcherConfig configures a DLQWatcher.
type DLQWatcherConfig struct {
	Namesrv []string
	// Group is the consumer group whose dead letters are watched; the watcher itself
	// consumes as Group + "-dlq-reconciler".
	Group    string
	Instance string
	// Retry is how often to try again while the DLQ topic does not exist yet (default 10s).
	Retry time.Duration
	// Credentials sign every request; zero: unsigned. The user must be allowed to subscribe
	// to the DLQ topic and to the group Group + "-dlq-reconciler".
	Credentials Credentials
	Logger      *slog.Logger
}

// DLQWatcher reads %DLQ%<group> from its first message and hands each one to a function
// (the reconciler). A function error retries the message later (concurrent consumption:
// order does not matter here, only that every dead letter is seen). The DLQ topic only exists
// after the group's first dead letter, so the watcher keeps trying to start until it does.
type DLQWatcher struct {
	cfg     DLQWatcherConfig
	fn      func(ctx context.Context, d Delivery) error
	log     *slog.Logger
	connect *lifecycle.Runner // subscribes until it succeeds or Stop
	stopped chan struct{}     // closed once Stop has shut the client down

	mu      sync.Mutex
	pc      rocketmq.PushConsumer
	running atomic.Bool
	closing bool
}

// NewDLQWatcher returns a watcher of the group's dead-letter queue.
func NewDLQWatcher(cfg DLQWatcherConfig, fn func(ctx context.Context, d Delivery) error) (*DLQWatcher, error) {
	if len(cfg.Namesrv) == 0 || cfg.Group == "" || fn == nil {
		return nil, errors.New("ordering: DLQ watcher needs a name server, a group and a function")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 10 * time.Second
	}
	w := &DLQWatcher{cfg: cfg, fn: fn, log: cfg.Logger.With("component", "dlq-watcher", "group", cfg.Group),
		stopped: make(chan struct{})}
	w.connect = lifecycle.NewRunner(w.connectLoop)
	return w, nil
}

// Running reports whether the watcher is subscribed to the DLQ.
func (w *DLQWatcher) Running() bool { return w.running.Load() }

// Start begins watching in the background; it returns at once.
func (w *DLQWatcher) Start(ctx context.Context) error {
	if err := w.connect.Start(ctx); err != nil {
		return fmt.Errorf("ordering: DLQ watcher: %w", err)
	}
	return nil
}

// Started is closed once Start has set the watcher subscribing.
func (w *DLQWatcher) Started() <-chan struct{} { return w.connect.Started() }

// Stopped is closed once Stop has shut the client down.
func (w *DLQWatcher) Stopped() <-chan struct{} { return w.stopped }

// connectLoop subscribes until it succeeds or ctx ends.
func (w *DLQWatcher) connectLoop(ctx context.Context) error {
	for {
		err := w.tryStart()
		if err == nil {
			w.running.Store(true)
			return nil
		}
		w.log.Info("dead-letter queue not readable yet; will retry", "topic", DLQTopic(w.cfg.Group), "in", w.cfg.Retry, "err", err)
		t := time.NewTimer(w.cfg.Retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (w *DLQWatcher) tryStart() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return nil
	}
	opts := []consumer.Option{
		consumer.WithNameServer(w.cfg.Namesrv),
		consumer.WithGroupName(w.cfg.Group + "-dlq-reconciler"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumeMessageBatchMaxSize(1),
		consumer.WithRoutePollInterval(time.Second),
	}
	if !w.cfg.Credentials.IsZero() {
		opts = append(opts, consumer.WithCredentials(w.cfg.Credentials.primitive()))
	}
	opts = append(opts, consumer.WithInstance(instanceName(w.cfg.Instance, w.cfg.Group+"-dlq")))
	pc, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return err
	}
	if err := pc.Subscribe(DLQTopic(w.cfg.Group), consumer.MessageSelector{}, w.consume); err != nil {
		_ = pc.Shutdown()
		return err
	}
	if err := pc.Start(); err != nil {
		_ = pc.Shutdown()
		return err
	}
	w.pc = pc
	return nil
}

func (w *DLQWatcher) consume(ctx context.Context, msgs ...*primitive.MessageExt) (res consumer.ConsumeResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("reconciler panicked; the dead letter is retried", "panic", fmt.Sprint(p))
			res, err = consumer.ConsumeRetryLater, nil
		}
	}()
	for _, m := range msgs {
		d := toDelivery(m)
		if origin := m.GetProperty(primitive.PropertyOriginMessageId); origin != "" {
			d.MsgID = origin
		}
		if err := w.fn(ctx, d); err != nil {
			w.log.Warn("reconciling a dead letter failed; retrying later", "msg_id", d.MsgID, "err", err)
			return consumer.ConsumeRetryLater, nil
		}
	}
	return consumer.ConsumeSuccess, nil
}

// Stop stops watching (or trying to) and persists offsets. A second Stop returns nil at
// once.
func (w *DLQWatcher) Stop(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	w.mu.Unlock()
	if err := w.connect.Stop(ctx); err != nil {
		return fmt.Errorf("ordering: DLQ watcher still subscribing at shutdown: %w", err)
	}
	defer close(w.stopped)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pc == nil {
		return nil
	}
	return w.pc.Shutdown()
}

// PropertyDeadLetterReason carries, on a message the application dead-lettered, why.
const PropertyDeadLetterReason = "DEAD_LETTER_REASON"

// DeadLetterPublisher publishes dead letters the application decided to %DLQ%<group> with
// the ordinary producer, where the broker's own dead letters of that group go too: one
// place for operators and the DLQ watcher to read. The topic must exist and be writable
// (the broker creates it only for its own dead letters).
type DeadLetterPublisher struct {
	p     *OrderedProducer
	topic string
}

// NewDeadLetterPublisher returns a publisher to group's DLQ through p.
func NewDeadLetterPublisher(p *OrderedProducer, group string) *DeadLetterPublisher {
	return &DeadLetterPublisher{p: p, topic: DLQTopic(group)}
}

// Topic returns the DLQ topic it publishes to.
func (d *DeadLetterPublisher) Topic() string { return d.topic }

// Publish stores one dead letter under key (also its message key, for mqadmin
// queryMsgByKey), with the original message id and the reason as properties.
func (d *DeadLetterPublisher) Publish(ctx context.Context, key, originMsgID, reason string, body []byte) error {
	// Properties travel as name\x01value\x02: keep the reason short and free of controls.
	reason = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, reason)
	if len(reason) > 256 {
		reason = strings.ToValidUTF8(reason[:256], "")
	}
	props := map[string]string{PropertyDeadLetterReason: reason}
	if originMsgID != "" {
		props[primitive.PropertyOriginMessageId] = originMsgID
	}
	_, err := d.p.SendOrderly(ctx, Message{Topic: d.topic, ShardingKey: key, Keys: []string{key}, Body: body, Properties: props})
	return err
}
