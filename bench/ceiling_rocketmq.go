package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// RawMQ is the raw broker ceiling: ordered SendSync of wallet-event-sized messages keyed by
// user, and orderly consumption of the same backlog with a no-op handler (same client, same
// harness and settings as the notifier: one goroutine per queue, batch size 1).
type RawMQ struct {
	Topic       string  `json:"topic"`
	Queues      int     `json:"queues"`
	Users       int     `json:"users"`
	Senders     int     `json:"senders"`
	BodyBytes   int     `json:"body_bytes"`
	Sent        int64   `json:"sent"`
	SendErrors  int64   `json:"send_errors"`
	SendRate    float64 `json:"send_per_s"`
	SendLatency Latency `json:"send_latency"`
	Consumed    int64   `json:"consumed"`
	ConsumeRate float64 `json:"consume_per_s"`
	ConsumeSecs float64 `json:"consume_s"`
	StartupSecs float64 `json:"consumer_startup_s"`
}

// brokerCeiling sends the raw backlog and drains it with a no-op handler; the topic stays, for
// the notifier's drain (notify_drain.go).
func (b *bench) brokerCeiling(ctx context.Context) error {
	done := b.step("raw RocketMQ ceiling")
	defer done()
	topic, err := b.newTopic(ctx, "raw", 8)
	if err != nil {
		return err
	}
	b.rawTopic = topic
	ns := []string{b.cfg.Namesrv}
	return b.profile("raw-rocketmq", func() error {
		cpu0 := b.meter.sample()
		r, err := produceBacklog(ctx, ns, b.cfg.RMQ, "bench-raw-producer-"+b.ts, topic, b.cfg.MQUsers, b.cfg.MQSenders, 0, b.cfg.MQSend, b.log)
		if err != nil {
			return err
		}
		r.Queues = 8
		b.res.RawMQSendCPU = b.meter.sample().since(cpu0)
		b.log.Info("raw send", "sent", r.Sent, "msg/s", r.SendRate, "p99_ms", r.SendLatency.P99)
		cpu1 := b.meter.sample()
		n, startup, busy, err := drainRaw(ctx, ns, b.cfg.RMQ, "bench-raw-consumer-"+b.ts, topic, r.Sent, 60*time.Second, b.log)
		b.res.RawMQConsumeCPU = b.meter.sample().since(cpu1)
		r.Consumed, r.StartupSecs, r.ConsumeSecs = n, round2(startup.Seconds()), round2(busy.Seconds())
		r.ConsumeRate = rate(n, busy)
		b.res.RawMQ = &r
		b.log.Info("raw consume", "consumed", n, "msg/s", r.ConsumeRate)
		return err
	})
}

// syntheticEvent is a wallet event as the relay would publish it for (user, seq).
func syntheticEvent(user, seq int64, id int64) (ordering.Message, error) {
	ev := walletevent.Event{
		EventID: id, UserID: user, Seq: seq, Kind: walletevent.Deposit, Amount: 10000, Currency: "CNY",
		BalanceAfter: seq * 10000, SagaID: id, Phone: fmt.Sprintf("+86139%08d", user), Locale: "en",
		OccurredAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	body, err := walletevent.Encode(ev)
	if err != nil {
		return ordering.Message{}, err
	}
	return ordering.Message{
		ShardingKey: ev.ShardingKey(), Tag: string(ev.Kind), Body: body,
		Keys: []string{strconv.FormatInt(id, 10), ev.SeqKey()},
	}, nil
}

// produceBacklog sends, with senders goroutines, each of users their events seq 1, 2, 3, …
// in order, until d has passed or perUser events each are sent (0 = no limit). A failed send
// is retried, so no user has a gap. It returns what it sent and the send latencies.
func produceBacklog(ctx context.Context, namesrv []string, creds ordering.Credentials, group, topic string, users, senders, perUser int, d time.Duration, log *slog.Logger) (RawMQ, error) {
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: namesrv, Group: group, Credentials: creds, Logger: log})
	if err != nil {
		return RawMQ{}, err
	}
	defer p.Shutdown() //nolint:errcheck // the measurement is over; a failed shutdown changes none of it
	r := RawMQ{Topic: topic, Users: users, Senders: senders}
	var (
		lat      recorder
		sent     atomic.Int64
		errs     atomic.Int64
		nextID   atomic.Int64
		bodySize atomic.Int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for s := range senders {
		wg.Go(func() {
			for seq := int64(1); perUser == 0 || seq <= int64(perUser); seq++ {
				for u := int64(s + 1); u <= int64(users); u += int64(senders) {
					if time.Now().After(end) || ctx.Err() != nil {
						return
					}
					m, err := syntheticEvent(u, seq, nextID.Add(1))
					if err != nil {
						errs.Add(1)
						return
					}
					m.Topic = topic
					bodySize.Store(int64(len(m.Body)))
					for ctx.Err() == nil {
						t0 := time.Now()
						_, err := p.SendOrderly(ctx, m)
						if err == nil {
							lat.add(time.Since(t0))
							sent.Add(1)
							break
						}
						errs.Add(1)
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	r.Sent, r.SendErrors, r.BodyBytes = sent.Load(), errs.Load(), int(bodySize.Load())
	r.SendRate = rate(r.Sent, el)
	r.SendLatency = lat.latency()
	return r, nil
}

// drainRaw consumes topic from its first offset with a fresh group and a no-op handler until
// want messages were seen or limit passed.
func drainRaw(ctx context.Context, namesrv []string, creds ordering.Credentials, group, topic string, want int64, limit time.Duration, log *slog.Logger) (consumed int64, startup, busy time.Duration, err error) {
	var (
		n           atomic.Int64
		first, last atomic.Int64
	)
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{
		Namesrv: namesrv, Group: group, Topic: topic, FromFirstOffset: true, Credentials: creds, Logger: log,
	}, func(_ context.Context, batch []ordering.Delivery) error {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		n.Add(int64(len(batch)))
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	if err := c.Start(ctx); err != nil {
		return 0, 0, 0, err
	}
	deadline := t0.Add(limit)
	for n.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = c.Stop(sctx)
	if first.Load() == 0 {
		return 0, time.Since(t0), 0, fmt.Errorf("raw consumer saw no message within %s", limit)
	}
	return n.Load(), time.Unix(0, first.Load()).Sub(t0), time.Duration(last.Load() - first.Load()), nil
}
