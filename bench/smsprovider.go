package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"
)

// provider is an SMS provider for the notifier's webhook sender, with the contract the
// README states: it answers after delay, deduplicates on the Idempotency-Key (409 to a key it
// accepted), and can be told to fail one phone for good (503) or everyone (an outage, 503).
// It notes when it accepted each (user, seq), and in which order per user.
type provider struct {
	delay time.Duration
	fail  string // phone whose SMS always fail
	srv   *http.Server
	url   string

	mu       sync.Mutex
	down     bool
	accepted map[[2]int64]time.Time
	order    map[int64][]int64
	hits     []time.Time
	calls    map[int64]int64 // per user
	dups     int64
}

func startProvider(ctx context.Context, delay time.Duration, failPhone string) (*provider, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &provider{delay: delay, fail: failPhone, url: "http://" + ln.Addr().String() + "/sms",
		accepted: map[[2]int64]time.Time{}, order: map[int64][]int64{}, calls: map[int64]int64{}}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	var m struct {
		UserID int64  `json:"user_id"`
		Seq    int64  `json:"seq"`
		Phone  string `json:"phone"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if p.delay > 0 {
		time.Sleep(p.delay)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[m.UserID]++
	switch key := [2]int64{m.UserID, m.Seq}; {
	case p.down || (p.fail != "" && m.Phone == p.fail):
		w.WriteHeader(http.StatusServiceUnavailable)
	case !p.accepted[key].IsZero():
		p.dups++
		w.WriteHeader(http.StatusConflict)
	default:
		now := time.Now()
		p.accepted[key] = now
		p.order[m.UserID] = append(p.order[m.UserID], m.Seq)
		p.hits = append(p.hits, now)
		w.WriteHeader(http.StatusOK)
	}
}

func (p *provider) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hits)
}

func (p *provider) callsOf(user int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[user]
}

// acceptedAt returns when (user, seq) was accepted (zero: not yet).
func (p *provider) acceptedAt(user, seq int64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted[[2]int64{user, seq}]
}

// outOfOrder counts accepted SMS whose seq is not the one after the user's previous one.
func (p *provider) outOfOrder() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, seqs := range p.order {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				n++
			}
		}
	}
	return n
}

// rateAfter counts the calls answered in [from, from+window) per second.
func (p *provider) rateAfter(from time.Time, window time.Duration) (int64, float64) {
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

func (p *provider) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}
