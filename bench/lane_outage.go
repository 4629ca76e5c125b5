package main

import (
	"context"
	"fmt"
	"time"
)

// Outage is the run whose provider answers 503 to everyone for a while during load.
type Outage struct {
	Users      int     `json:"users"`
	RatePerS   float64 `json:"rate_per_s"`
	LoadSecs   float64 `json:"load_s"`
	OutageSecs float64 `json:"outage_s"`
	// RequestErrors are the load's deposits that were refused or unanswered.
	RequestErrors int64 `json:"request_errors"`
	Events        int64 `json:"events"`
	Delivered     int64 `json:"delivered"`
	DeadLettered  int64 `json:"dead_lettered"`
	OutOfOrder    int64 `json:"out_of_order"`
	Duplicates    int64 `json:"duplicates_refused"`
	// RecoverySecs: from the provider's recovery to the last SMS of an event committed before it.
	RecoverySecs  float64 `json:"recovery_s"`
	BreakerOpened int64   `json:"breaker_opened"`
}

// outage: the provider answers 503 to everyone for OutageSecs in the middle of LoadSecs of
// deposits at half load.
func (b *bench) outage(ctx context.Context) error {
	done := b.step("SMS provider outage")
	defer done()
	prov := startProvider(0, "")
	defer prov.Close()
	s, err := b.startLaneStack(ctx, "outage", prov, b.cfg.LaneUsers)
	defer b.stopLaneStack("outage", s)
	if err != nil {
		return err
	}
	load := b.cfg.Outage + 10*time.Second
	r := Outage{Users: len(s.users), RatePerS: b.laneRate(), LoadSecs: load.Seconds(), OutageSecs: b.cfg.Outage.Seconds()}
	var recovered time.Time
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		prov.SetOutage(true)
		select {
		case <-ctx.Done():
		case <-time.After(b.cfg.Outage):
		}
		prov.SetOutage(false)
	}()
	after, err := s.lastEventID(ctx)
	if err != nil {
		return err
	}
	from := time.Now()
	r.RequestErrors = openLoop(ctx, r.RatePerS, load, func(i int64) error {
		return s.deposit(ctx, s.users[i%int64(len(s.users))], fmt.Sprintf("outage-%d-%d", b.tag, i))
	})
	recovered = from.Add(5*time.Second + b.cfg.Outage)
	evs, err := b.waitAccepted(ctx, s.db, prov, after, from, time.Now(), 0)
	if err != nil {
		return err
	}
	var last time.Time
	for _, e := range evs {
		r.Events++
		at := prov.DeliveredAt(e.user, e.seq)
		if at.IsZero() {
			continue
		}
		r.Delivered++
		if e.at.Before(recovered) && at.After(last) {
			last = at
		}
	}
	if !last.IsZero() {
		r.RecoverySecs = round2(max(last.Sub(recovered), 0).Seconds())
	}
	_ = s.db.QueryRow(ctx, `SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered'`).Scan(&r.DeadLettered)
	r.OutOfOrder, r.Duplicates = int64(prov.OutOfOrder()), int64(prov.Repeats())
	r.BreakerOpened = breakerOpened(ctx, s.notifier)
	b.lanes().Outage = &r
	b.log.Info("provider outage", "events", r.Events, "delivered", r.Delivered, "dead_lettered", r.DeadLettered, "recovery_s", r.RecoverySecs)
	return nil
}
