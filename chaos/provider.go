package main

import (
	"bytes"
	"context"
	"hash/fnv"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

// startSMSProvider starts the run's SMS provider, behind the notifiers' webhook sender: the
// tests' own, with the contract docs/API.md states (one delivery per Idempotency-Key; a key
// it delivered gets its first answer again, replayed; a key still being delivered, 409 in
// progress). It delivers an SMS by writing it to notify.sms_log, where the
// audit reads what users got; while that table is away (a Postgres restart) it answers 503
// and delivers nothing. The phones matching fail always get 503 (users whose SMS always
// fail); a fault takes it down for everyone or makes it hang (SetOutage, SetHanging), slows
// it down (SetDelay), or, while g is on, garbles some of its answers.
func startSMSProvider(db *pgxpool.Pool, fail *regexp.Regexp, g *garbler) *smsprovider.Provider {
	p := smsprovider.Start()
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		failing := fail.MatchString(c.Phone)
		if c.Delivered {
			// An SMS delivered before (its answer, or its record, was lost) gets its first
			// answer again (replayed), garbling or not: a provider does not refuse for good
			// what it delivered.
			return smsprovider.Fault{}
		}
		if status := g.status(c.Key, c.UserID, c.Seq, failing); status != 0 {
			return smsprovider.Fault{Status: status, Body: garbledBody}
		}
		if failing {
			return smsprovider.Fault{Status: http.StatusServiceUnavailable}
		}
		return smsprovider.Fault{}
	})
	p.OnDeliver(func(ctx context.Context, c smsprovider.Call) error {
		// A row there already is this SMS delivered before an answer was lost: delivered.
		_, err := db.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text, late) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, c.UserID, c.Seq, c.Phone, c.Text, c.Late)
		return err
	})
	return p
}

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
var garbledBody = func() string {
	var b bytes.Buffer
	b.WriteString(`{"error":"` + garbleMark + "\x00")
	for b.Len() < 6000 {
		b.WriteString("：发送失败，请稍后重试。Ошибка шлюза ✉️ ")
	}
	body := b.Bytes()
	// Cut inside the last character: drop its final byte.
	for i := len(body) - 1; i > 0; i-- {
		if body[i]&0xC0 == 0x80 && body[i-1]&0xC0 != 0x80 {
			return string(body[:i])
		}
	}
	return string(body)
}()

// garbler decides which of the provider's answers are garbled while it is on, and keeps
// which SMS it refused for good (the audit expects those dead-lettered) and which it failed
// for a while.
type garbler struct {
	on atomic.Bool

	mu      sync.Mutex
	garbled map[string]int // key → garbled 500s so far
	refused map[[2]int64]bool
	retried map[[2]int64]bool
}

func newGarbler() *garbler {
	return &garbler{garbled: map[string]int{}, refused: map[[2]int64]bool{}, retried: map[[2]int64]bool{}}
}

// status is the status of a garbled answer to the SMS under key, or 0 for none (answer as
// usual); always 0 while the garbler is off.
func (g *garbler) status(key string, user, seq int64, failing bool) int {
	if !g.on.Load() {
		return 0
	}
	if failing {
		return http.StatusServiceUnavailable
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	class := h.Sum32() % garbleEvery
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case class == 0:
		g.refused[[2]int64{user, seq}] = true
		return http.StatusBadRequest
	case class <= garbleRetried && g.garbled[key] < garbleTimes:
		g.garbled[key]++
		g.retried[[2]int64{user, seq}] = true
		return http.StatusInternalServerError
	}
	return 0
}

// refusedSMS reports whether (user, seq)'s SMS was answered a garbled 400.
func (g *garbler) refusedSMS(user, seq int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused[[2]int64{user, seq}]
}

// garbledSMS returns the SMS answered a garbled 400 and those answered a garbled 500.
func (g *garbler) garbledSMS() (refused, retried [][2]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.refused {
		refused = append(refused, k)
	}
	for k := range g.retried {
		retried = append(retried, k)
	}
	return refused, retried
}
