package main

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"net"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The provider's modes: working, down (503 to everyone), hanging (no answer until the
// caller gives up).
const (
	providerUp int32 = iota
	providerDown
	providerHanging
)

// While the provider garbles its errors, it answers one SMS in garbleEvery with a garbled 400
// (a permanent refusal: the SMS is dead-lettered at once), the next garbleRetried of them
// with a garbled 500 on their first garbleTimes attempts (then it delivers them), and the
// phones configured to fail with a garbled 503; which SMS is a function of its key.
const (
	garbleEvery   = 20
	garbleRetried = 3
	garbleTimes   = 2
)

// garbleMark is a phrase of every garbled body: a failure reason that holds it was stored
// from a garbled reply.
const garbleMark = "短信网关错误"

// garbledBody is a garbled error body: kilobytes of multi-byte text (Chinese, Cyrillic, an
// emoji) with a NUL byte near the start, cut inside a character at the end; nearly every
// character is multi-byte, so a reader that keeps a prefix of it cuts one too.
var garbledBody = func() []byte {
	var b bytes.Buffer
	b.WriteString(`{"error":"` + garbleMark + "\x00")
	for b.Len() < 6000 {
		b.WriteString("：发送失败，请稍后重试。Ошибка шлюза ✉️ ")
	}
	body := b.Bytes()
	// Cut inside the last character: drop its final byte.
	for i := len(body) - 1; i > 0; i-- {
		if body[i]&0xC0 == 0x80 && body[i-1]&0xC0 != 0x80 {
			return body[:i]
		}
	}
	return body
}()

// smsProvider is the run's SMS provider, behind the notifiers' webhook sender. It delivers an
// SMS by writing it to notify.sms_log, where the audit reads what users got, and keeps the
// contract the README states: one delivery per Idempotency-Key (a key it has delivered
// answers 409). The phones configured to fail always get 503 (users whose SMS always fail);
// a fault can take it down for everyone, make it hang, slow it down, or make it garble its
// errors.
type smsProvider struct {
	db   *pgxpool.Pool
	fail *regexp.Regexp
	srv  *http.Server
	url  string
	mode atomic.Int32
	// garble is on while the provider garbles its errors (see garbleEvery).
	garble atomic.Bool
	// latency is how long it takes to deliver an SMS, from the request to the SMS log row.
	latency atomic.Int64
	calls   atomic.Int64

	mu sync.Mutex
	// garbled counts each key's garbled 500s; refused holds the SMS answered a garbled 400,
	// which the policy dead-letters and the audit expects dead-lettered.
	garbled   map[string]int
	refused   map[[2]int64]bool
	retried   map[[2]int64]bool
	conflicts []time.Time // when it answered 409 (a key it had delivered)
}

func startSMSProvider(ctx context.Context, db *pgxpool.Pool, fail *regexp.Regexp) (*smsProvider, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &smsProvider{db: db, fail: fail, url: "http://" + ln.Addr().String() + "/sms",
		garbled: map[string]int{}, refused: map[[2]int64]bool{}, retried: map[[2]int64]bool{}}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *smsProvider) serve(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	var m struct {
		UserID int64  `json:"user_id"`
		Seq    int64  `json:"seq"`
		Phone  string `json:"phone"`
		Text   string `json:"text"`
		Late   bool   `json:"late"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	switch p.mode.Load() {
	case providerDown:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case providerHanging:
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	failing := p.fail.MatchString(m.Phone)
	if p.garble.Load() {
		if status := p.garbleStatus(r.Header.Get("Idempotency-Key"), m.UserID, m.Seq, failing); status != 0 {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(status)
			_, _ = w.Write(garbledBody)
			return
		}
	}
	if failing {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if d := time.Duration(p.latency.Load()); d > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(d):
		}
	}
	tag, err := p.db.Exec(r.Context(), `INSERT INTO notify.sms_log (user_id, seq, phone, text, late) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING`, m.UserID, m.Seq, m.Phone, m.Text, m.Late)
	switch {
	case err != nil:
		w.WriteHeader(http.StatusServiceUnavailable) // its own database is away (a Postgres restart)
	case tag.RowsAffected() == 0:
		p.mu.Lock()
		p.conflicts = append(p.conflicts, time.Now())
		p.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// garbleStatus decides, while the provider garbles, whether the SMS under key gets a garbled
// answer, and which status (0: none, answer as usual).
func (p *smsProvider) garbleStatus(key string, user, seq int64, failing bool) int {
	if failing {
		return http.StatusServiceUnavailable
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	class := h.Sum32() % garbleEvery
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case class == 0:
		p.refused[[2]int64{user, seq}] = true
		return http.StatusBadRequest
	case class <= garbleRetried && p.garbled[key] < garbleTimes:
		p.garbled[key]++
		p.retried[[2]int64{user, seq}] = true
		return http.StatusInternalServerError
	}
	return 0
}

// refusedSMS reports whether the provider answered (user, seq)'s SMS a garbled 400.
func (p *smsProvider) refusedSMS(user, seq int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused[[2]int64{user, seq}]
}

// garbledSMS returns the SMS answered a garbled 400 and those answered a garbled 500.
func (p *smsProvider) garbledSMS() (refused, retried [][2]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.refused {
		refused = append(refused, k)
	}
	for k := range p.retried {
		retried = append(retried, k)
	}
	return refused, retried
}

// conflictsBetween counts the 409s (a key delivered before) answered from start to end.
func (p *smsProvider) conflictsBetween(start, end time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.conflicts {
		if !t.Before(start) && !t.After(end) {
			n++
		}
	}
	return n
}

func (p *smsProvider) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}
