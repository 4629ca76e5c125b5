package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"
)

// provider is an SMS provider for the webhook sender, with the contract the README states:
// it deduplicates on the Idempotency-Key header (a key it accepted before answers 409) and
// can be told to fail: everyone (an outage), one phone (a poisoned user), or one key's first
// answer (accepted, but the answer is lost).
type provider struct {
	srv *httptest.Server

	mu       sync.Mutex
	outage   bool
	fail     map[string]int           // phone → status it always gets
	hang     map[string]time.Duration // phone → how long its calls hang before a 503
	loseOnce map[string]bool          // key → accept it, then answer 500 once
	accepted map[string]smsCall       // key → the call that was accepted
	calls    []smsCall
}

// smsCall is one request the provider answered.
type smsCall struct {
	Key    string
	UserID int64
	Seq    int64
	Phone  string
	Late   bool
	Status int
	At     time.Time
}

func newProvider(t *testing.T) *provider {
	p := &provider{fail: map[string]int{}, hang: map[string]time.Duration{}, loseOnce: map[string]bool{}, accepted: map[string]smsCall{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) url() string { return p.srv.URL + "/sms" }

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		UserID int64  `json:"user_id"`
		Seq    int64  `json:"seq"`
		Phone  string `json:"phone"`
		Late   bool   `json:"late"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c := smsCall{Key: r.Header.Get("Idempotency-Key"), UserID: body.UserID, Seq: body.Seq, Phone: body.Phone, Late: body.Late}
	p.mu.Lock()
	hang := p.hang[c.Phone]
	p.mu.Unlock()
	if hang > 0 {
		select {
		case <-time.After(hang):
		case <-r.Context().Done():
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c.At = time.Now()
	switch _, seen := p.accepted[c.Key]; {
	case p.outage || hang > 0:
		c.Status = http.StatusServiceUnavailable
	case p.fail[c.Phone] != 0:
		c.Status = p.fail[c.Phone]
	case seen:
		c.Status = http.StatusConflict
	case p.loseOnce[c.Key]:
		delete(p.loseOnce, c.Key)
		p.accepted[c.Key] = c
		c.Status = http.StatusInternalServerError
	default:
		p.accepted[c.Key] = c
		c.Status = http.StatusOK
	}
	p.calls = append(p.calls, c)
	w.WriteHeader(c.Status)
}

func (p *provider) setOutage(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outage = on
}

func (p *provider) setHang(phone string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang[phone] = d
}

func (p *provider) setLoseOnce(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseOnce[key] = true
}

// callsOf returns the calls made so far, in the order they were answered.
func (p *provider) callsOf(filter func(smsCall) bool) []smsCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []smsCall
	for _, c := range p.calls {
		if filter == nil || filter(c) {
			out = append(out, c)
		}
	}
	return out
}

// acceptedSeqs returns, per user, the seqs the provider accepted, in the order it accepted them.
func (p *provider) acceptedSeqs() map[int64][]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var acc []smsCall
	for _, c := range p.accepted {
		acc = append(acc, c)
	}
	sort.Slice(acc, func(i, j int) bool { return acc[i].At.Before(acc[j].At) })
	out := map[int64][]int64{}
	for _, c := range acc {
		out[c.UserID] = append(out[c.UserID], c.Seq)
	}
	return out
}
