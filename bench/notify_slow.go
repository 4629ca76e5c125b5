package main

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// SlowProvider is the run whose SMS provider takes Delay per SMS.
type SlowProvider struct {
	Users      int     `json:"users"`
	Queues     int     `json:"queues"`
	Workers    int     `json:"workers"`
	DelayMS    int     `json:"delay_ms"`
	Backlog    int64   `json:"backlog"`
	WindowSecs float64 `json:"window_s"`
	Hits       int64   `json:"provider_calls"`
	SMSPerS    float64 `json:"sms_per_s"`
	// QueueCeiling is what one SMS in flight per queue allows (queues × 1/delay): the old
	// design's limit, which the lanes are to beat 4×. LaneCeiling is the lanes' own
	// (workers × 1/delay).
	QueueCeiling float64 `json:"queue_ceiling_per_s"`
	LaneCeiling  float64 `json:"lane_ceiling_per_s"`
	OutOfOrder   int64   `json:"out_of_order"`
	Duplicates   int64   `json:"duplicates"`
}

// slowProvider measures the notifier's lanes behind an SMS provider that takes -slow-delay
// per SMS, on a backlog large enough that no user runs dry.
func (b *bench) slowProvider(ctx context.Context) error {
	done := b.step("slow SMS provider")
	defer done()
	c := b.cfg
	topic, err := b.newTopic(ctx, "slow", c.SlowQueues)
	if err != nil {
		return err
	}
	// The pool is set, not the default: the run asks what lanes do beyond the per-queue
	// ceiling, and a pool this size keeps the backlog it needs small.
	const workers = 64
	// Enough backlog that no user runs dry within the window: the lanes' ceiling's worth, twice.
	perUser := int((workers/c.SlowDelay.Seconds())*(c.SlowWindow.Seconds()+5)*2)/c.SlowUsers + 1
	mq, err := produceBacklog(ctx, []string{c.Namesrv}, c.RMQ, "bench-slow-producer-"+b.ts, topic, c.SlowUsers, 16, perUser, 2*time.Minute, b.log)
	if err != nil {
		return err
	}
	u, err := b.newDB(ctx, "slow")
	if err != nil {
		return err
	}
	prov := startProvider(c.SlowDelay, "")
	defer prov.Close()
	_, nenv := b.productEnv(u, topic)
	nenv["SMS_SENDER"], nenv["SMS_WEBHOOK_URL"], nenv["SMS_WORKERS"] = "webhook", prov.URL(), strconv.Itoa(workers)
	if _, err := b.start(ctx, "notifier-slow", "notifier", nenv); err != nil {
		return err
	}
	defer b.stopProc("notifier-slow")
	deadline := time.Now().Add(60 * time.Second)
	for prov.DeliveredCount() == 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("the slow provider got no call within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Skip the first second (queues are locked one rebalance at a time), then measure.
	from := time.Now().Add(time.Second)
	time.Sleep(time.Until(from.Add(c.SlowWindow)) + 100*time.Millisecond)
	hits := int64(prov.DeliveredBetween(from, from.Add(c.SlowWindow)))
	r, dups := rate(hits, c.SlowWindow), int64(prov.Repeats())
	b.res.Slow = &SlowProvider{
		Users: c.SlowUsers, Queues: c.SlowQueues, Workers: workers, DelayMS: int(c.SlowDelay / time.Millisecond), Backlog: mq.Sent,
		WindowSecs: c.SlowWindow.Seconds(), Hits: hits, SMSPerS: r, OutOfOrder: int64(prov.OutOfOrder()), Duplicates: dups,
		QueueCeiling: round2(float64(c.SlowQueues) / c.SlowDelay.Seconds()),
		LaneCeiling:  round2(float64(workers) / c.SlowDelay.Seconds()),
	}
	b.log.Info("slow provider", "sms/s", r)
	return nil
}
