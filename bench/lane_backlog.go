package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Backlog is a notifier draining a large backlog with the log sender.
type Backlog struct {
	Messages   int64   `json:"messages"`
	Users      int     `json:"users"`
	SMS        int64   `json:"sms"`
	Seconds    float64 `json:"seconds"`
	SMSPerS    float64 `json:"sms_per_s"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

// backlog: a fresh notifier (log sender) drains a backlog of BacklogSize messages; its peak
// RSS is the point.
func (b *bench) backlog(ctx context.Context) error {
	done := b.step("notifier draining a large backlog")
	defer done()
	c := b.cfg
	topic, err := b.newTopic(ctx, "backlog", 8)
	if err != nil {
		return err
	}
	perUser := (c.BacklogSize + c.MQUsers - 1) / c.MQUsers
	mq, err := produceBacklog(ctx, []string{c.Namesrv}, c.RMQ, "bench-backlog-producer-"+b.ts, topic, c.MQUsers, c.MQSenders, perUser, 10*time.Minute, b.log)
	if err != nil {
		return err
	}
	u, err := b.newDB(ctx, "backlog")
	if err != nil {
		return err
	}
	db, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	_, nenv := b.productEnv(u, topic)
	t0 := time.Now()
	p, err := b.start(ctx, "notifier-backlog", "notifier", nenv)
	if err != nil {
		return err
	}
	defer b.stopProc("notifier-backlog")
	r, err := measureDrain(ctx, db, t0, mq.Sent, 5*time.Minute)
	if err != nil {
		return err
	}
	bl := Backlog{Messages: mq.Sent, Users: c.MQUsers, SMS: r.SMS, Seconds: r.Seconds, SMSPerS: r.SMSPerS, PeakRSSMiB: peakRSSMiB(p)}
	b.lanes().Backlog = &bl
	b.log.Info("backlog", "messages", bl.Messages, "sms", bl.SMS, "sms/s", bl.SMSPerS, "peak_rss_mib", bl.PeakRSSMiB)
	return nil
}
