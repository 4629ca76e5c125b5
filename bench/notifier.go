package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
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

// SlowProvider is the run whose SMS provider takes Delay per SMS.
type SlowProvider struct {
	Users         int     `json:"users"`
	Queues        int     `json:"queues"`
	DelayMS       int     `json:"delay_ms"`
	Backlog       int64   `json:"backlog"`
	WindowSecs    float64 `json:"window_s"`
	Hits          int64   `json:"provider_calls"`
	SMSPerS       float64 `json:"sms_per_s"`
	DesignCeiling float64 `json:"design_ceiling_per_s"` // queues × 1/delay
}

// slowProvider is an SMS provider that answers 200 after delay, and notes when.
type slowProvider struct {
	delay time.Duration
	srv   *http.Server
	url   string
	mu    sync.Mutex
	hits  []time.Time
}

func startSlowProvider(delay time.Duration) (*slowProvider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &slowProvider{delay: delay, url: "http://" + ln.Addr().String() + "/sms"}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(p.delay)
		p.mu.Lock()
		p.hits = append(p.hits, time.Now())
		p.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *slowProvider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hits)
}

// rateAfter counts the calls answered in [from, from+window) per second.
func (p *slowProvider) rateAfter(from time.Time, window time.Duration) (int64, float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, t := range p.hits {
		if !t.Before(from) && t.Before(from.Add(window)) {
			n++
		}
	}
	return n, rate(n, window)
}

func (p *slowProvider) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}
