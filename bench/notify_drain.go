package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// NotifyDrain is the notifier's own ceiling: it drains the raw broker run's backlog (same
// topic, same messages) into a fresh database with the log sender.
type NotifyDrain struct {
	Backlog     int64     `json:"backlog"`
	SMS         int64     `json:"sms"`
	Seconds     float64   `json:"seconds"`
	SMSPerS     float64   `json:"sms_per_s"`
	StartupSecs float64   `json:"startup_s"`
	CPU         CPUSample `json:"cpu_s"`
	DBCommits   int64     `json:"db_commits"`
	PeakRSSMiB  float64   `json:"peak_rss_mib"`
}

// notifyDrain starts a notifier on the raw broker run's topic (ceiling_rocketmq.go) and a fresh
// database, and measures it draining that backlog.
func (b *bench) notifyDrain(ctx context.Context) error {
	done := b.step("notifier drain of the raw backlog")
	defer done()
	u, err := b.newDB(ctx, "drain")
	if err != nil {
		return err
	}
	_, nenv := b.productEnv(u, b.rawTopic)
	db, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	t0 := time.Now()
	p, err := b.start(ctx, "notifier-drain", "notifier", nenv)
	if err != nil {
		return err
	}
	cpu0 := b.meter.sample()
	var c0 int64
	_ = db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&c0)
	r, err := measureDrain(ctx, db, t0, b.res.RawMQ.Sent, b.cfg.NotifyWindow)
	r.CPU = b.meter.sample().since(cpu0)
	var c1 int64
	_ = db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&c1)
	r.DBCommits = c1 - c0
	r.PeakRSSMiB = peakRSSMiB(p)
	b.stopProc("notifier-drain")
	b.res.NotifyDrain = &r
	b.log.Info("notifier drain", "sms", r.SMS, "sms/s", r.SMSPerS)
	return err
}

// measureDrain waits for the first SMS row in db, then for window (or the whole backlog),
// and returns the SMS rate between the first and the last row.
func measureDrain(ctx context.Context, db *pgxpool.Pool, t0 time.Time, backlog int64, window time.Duration) (NotifyDrain, error) {
	r := NotifyDrain{Backlog: backlog}
	count := func() int64 {
		var n int64
		_ = db.QueryRow(ctx, `SELECT count(*) FROM notify.sms_log`).Scan(&n)
		return n
	}
	for count() == 0 {
		if time.Since(t0) > 60*time.Second || ctx.Err() != nil {
			return r, fmt.Errorf("no SMS within 60s of the notifier's start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.StartupSecs = round2(time.Since(t0).Seconds())
	end := time.Now().Add(window)
	for time.Now().Before(end) && count() < backlog && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	var secs float64
	if err := db.QueryRow(ctx, `SELECT count(*), COALESCE(extract(epoch FROM max(sent_at) - min(sent_at)), 0) FROM notify.sms_log`).Scan(&r.SMS, &secs); err != nil {
		return r, err
	}
	r.Seconds = round2(secs)
	if secs > 0 {
		r.SMSPerS = round2(float64(r.SMS-1) / secs)
	}
	return r, nil
}
