package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
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
	Retry  time.Duration
	Logger *slog.Logger
}

// DLQWatcher reads %DLQ%<group> from its first message and hands each one to a function
// (the reconciler). A function error retries the message later (concurrent consumption:
// order does not matter here, only that every dead letter is seen). The DLQ topic only exists
// after the group's first dead letter, so the watcher keeps trying to start until it does.
type DLQWatcher struct {
	cfg  DLQWatcherConfig
	fn   func(ctx context.Context, d Delivery) error
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	pc       rocketmq.PushConsumer
	running  atomic.Bool
	started  atomic.Bool
	stopOnce sync.Once
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
	return &DLQWatcher{cfg: cfg, fn: fn, log: cfg.Logger.With("component", "dlq-watcher", "group", cfg.Group),
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Running reports whether the watcher is subscribed to the DLQ.
func (w *DLQWatcher) Running() bool { return w.running.Load() }

// Start begins watching in the background; it returns at once.
func (w *DLQWatcher) Start() error {
	if w.started.Swap(true) {
		return errors.New("ordering: DLQ watcher already started")
	}
	go func() {
		defer close(w.done)
		for {
			err := w.tryStart()
			if err == nil {
				w.running.Store(true)
				return
			}
			w.log.Info("dead-letter queue not readable yet; will retry", "topic", DLQTopic(w.cfg.Group), "in", w.cfg.Retry, "err", err)
			select {
			case <-w.stop:
				return
			case <-time.After(w.cfg.Retry):
			}
		}
	}()
	return nil
}

func (w *DLQWatcher) tryStart() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.stop:
		return nil
	default:
	}
	opts := []consumer.Option{
		consumer.WithNameServer(w.cfg.Namesrv),
		consumer.WithGroupName(w.cfg.Group + "-dlq-reconciler"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumeMessageBatchMaxSize(1),
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

// Shutdown stops watching (or trying to) and persists offsets.
func (w *DLQWatcher) Shutdown() error {
	w.stopOnce.Do(func() { close(w.stop) })
	if !w.started.Load() {
		return nil
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pc == nil {
		return nil
	}
	return w.pc.Shutdown()
}
