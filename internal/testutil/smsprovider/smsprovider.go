// Package smsprovider is the one fake SMS provider of the tests, e2e, the bench and chaos. It
// speaks the contract the notifier's webhook sender calls (POST JSON {user_id, seq, phone,
// text, late, locale, template, params} with the header Idempotency-Key; docs/API.md),
// refusing a body with any other field or without a template: it delivers each key once and
// answers 200 {"message_id"}; a key it delivered before gets that answer again, marked
// Idempotent-Replayed: true; a key whose first call it is still processing gets 409
// in_progress (never "delivered"). On demand it is slow, down for everyone, hanging, or
// fails, hangs or garbles chosen calls. It notes every call, so a test can say what users
// got.
package smsprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"time"
)

// Call is one request the provider answered.
type Call struct {
	Key    string // the Idempotency-Key header
	UserID int64
	Seq    int64
	Phone  string
	Text   string
	Late   bool
	// Locale, Template and Params are the SMS as a provider of templates takes it.
	Locale   string
	Template string
	Params   map[string]string
	Status   int       // what the provider answered
	At       time.Time // when it answered
	// Traceparent is the W3C traceparent header the call carried, "" when none.
	Traceparent string
	// Delivered tells the fault hook that the key was delivered before: a provider that
	// keeps its contract answers it with its first answer again, whatever else its fault
	// does to new SMS.
	Delivered bool
	// Replayed: the call was answered with the first answer to its key again (200,
	// Idempotent-Replayed: true): delivered before, not now.
	Replayed bool
	// MessageID is the id of the delivered SMS a 200 answered with ("" otherwise).
	MessageID string
}

// The answers of the contract that carry a body of their own.
const (
	// HeaderReplayed marks the first answer to a key, given again.
	HeaderReplayed = "Idempotent-Replayed"
	// InProgressBody is the body of a 409: a call under the same key is still processed.
	InProgressBody = `{"error":{"code":"in_progress","message":"a send under this Idempotency-Key is still being processed; ask again later"}}`
)

// Fault is what the provider does with a call instead of delivering it; the zero Fault
// delivers.
type Fault struct {
	// Hang holds the call this long first, or until its caller gives up; then the provider
	// answers Status, or 503 when Status is not set.
	Hang time.Duration
	// Status is answered instead of delivering.
	Status int
	// Body goes with Status: a broken reply, as a provider in trouble sends one.
	Body string
	// LoseAnswer delivers the SMS, then answers 500: the caller never learns it went.
	LoseAnswer bool
	// RetryAfter, when set, is sent as the Retry-After header of the answer.
	RetryAfter string
}

// Provider is a running fake SMS provider. It is safe for concurrent use.
type Provider struct {
	srv *httptest.Server

	mu        sync.Mutex
	delay     time.Duration
	outage    bool
	hanging   bool
	fault     func(Call) Fault
	deliver   func(context.Context, Call) error
	onCall    func(Call)
	delivered map[string]Call // key → the call that delivered it
	inflight  map[string]bool // keys a call is delivering now
	byUserSeq map[[2]int64]time.Time
	order     map[int64][]int64 // user → seqs in the order they were delivered
	times     []time.Time       // delivery times, in order
	calls     []Call
	repeats   int // replayed answers: calls for a key delivered before
}

// Start serves a provider on a loopback port until Close.
func Start() *Provider {
	p := &Provider{delivered: map[string]Call{}, inflight: map[string]bool{}, byUserSeq: map[[2]int64]time.Time{}, order: map[int64][]int64{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the address to give the webhook sender (SMS_WEBHOOK_URL).
func (p *Provider) URL() string { return p.srv.URL + "/sms" }

// Close stops the provider; calls in flight are cut off.
func (p *Provider) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// SetDelay makes every answer take at least d: a slow provider.
func (p *Provider) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// SetOutage answers 503 to every call while on: the provider is down for everyone.
func (p *Provider) SetOutage(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outage = on
}

// SetHanging holds every call until its caller gives up (then 503) while on.
func (p *Provider) SetHanging(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hanging = on
}

// SetFault decides, call by call, what the provider does instead of delivering; nil (the
// start) delivers every call.
func (p *Provider) SetFault(f func(Call) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// OnDeliver runs f for each SMS about to be delivered (a key not delivered before), before
// the provider answers; an error from f answers 503 and delivers nothing (chaos writes what
// it delivers to a table, which may be away).
func (p *Provider) OnDeliver(f func(context.Context, Call) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deliver = f
}

// OnCall runs f for every call as it arrives, before anything else (a test checks a rule at
// each send).
func (p *Provider) OnCall(f func(Call)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onCall = f
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		UserID   int64             `json:"user_id"`
		Seq      int64             `json:"seq"`
		Phone    string            `json:"phone"`
		Text     string            `json:"text"`
		Late     bool              `json:"late"`
		Locale   string            `json:"locale"`
		Template string            `json:"template"`
		Params   map[string]string `json:"params"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Read to the end, so that the server notices a caller that hangs up.
	_, _ = io.Copy(io.Discard, r.Body)
	c := Call{Key: r.Header.Get("Idempotency-Key"), UserID: body.UserID, Seq: body.Seq, Phone: body.Phone, Text: body.Text, Late: body.Late,
		Locale: body.Locale, Template: body.Template, Params: body.Params, Traceparent: r.Header.Get("Traceparent")}
	if c.Key == "" {
		http.Error(w, "an Idempotency-Key header is required", http.StatusBadRequest)
		return
	}
	if c.Template == "" || c.Locale == "" || c.Params == nil {
		http.Error(w, "a template, its locale and its params are required", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	delay, onCall, deliver := p.delay, p.onCall, p.deliver
	_, c.Delivered = p.delivered[c.Key]
	var f Fault
	switch {
	case p.outage:
		f = Fault{Status: http.StatusServiceUnavailable}
	case p.hanging:
		f = Fault{Hang: time.Hour}
	case !c.Delivered && p.inflight[c.Key]:
		// Another call is delivering this key: its outcome is not known yet.
		f = Fault{Status: http.StatusConflict, Body: InProgressBody}
	case p.fault != nil:
		f = p.fault(c)
	}
	// A call that goes on to deliver holds its key from now until it answers.
	claimed := f.Status == 0 && f.Hang == 0 && !c.Delivered
	if claimed {
		p.inflight[c.Key] = true
	}
	p.mu.Unlock()
	if onCall != nil {
		onCall(c)
	}
	if f.Hang > 0 && f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	if wait := max(delay, f.Hang); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	c.Status = f.Status
	answer, isJSON := f.Body, f.Body == InProgressBody
	if c.Status == 0 {
		c = p.deliverOnce(r.Context(), c, deliver, f.LoseAnswer, claimed)
		if c.Status == http.StatusOK {
			answer, isJSON = `{"message_id":"`+c.MessageID+`"}`, true
		}
	}
	p.mu.Lock()
	c.At = time.Now()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
	}
	if c.Replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if f.RetryAfter != "" && c.Status == f.Status {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	w.WriteHeader(c.Status)
	if answer != "" {
		_, _ = io.WriteString(w, answer)
	}
}

// deliverOnce delivers c unless its key was delivered before (then it answers with the first
// answer again, replayed), and returns c with its answer; claimed says c holds its key in
// flight, which it gives back.
func (p *Provider) deliverOnce(ctx context.Context, c Call, deliver func(context.Context, Call) error, loseAnswer, claimed bool) Call {
	release := func() {
		if claimed {
			delete(p.inflight, c.Key)
		}
	}
	p.mu.Lock()
	first, seen := p.delivered[c.Key]
	if seen {
		p.repeats++
		release()
	}
	p.mu.Unlock()
	if seen {
		c.Status, c.Replayed, c.MessageID = http.StatusOK, true, first.MessageID
		return c
	}
	if deliver != nil {
		if err := deliver(ctx, c); err != nil {
			p.mu.Lock()
			release()
			p.mu.Unlock()
			c.Status = http.StatusServiceUnavailable
			return c
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	release()
	if first, seen := p.delivered[c.Key]; seen {
		// Delivered by a call of the same key that was faster: this one is its repeat.
		p.repeats++
		c.Status, c.Replayed, c.MessageID = http.StatusOK, true, first.MessageID
		return c
	}
	now := time.Now()
	c.At = now
	c.MessageID = fmt.Sprintf("msg-%d", len(p.delivered)+1)
	p.delivered[c.Key] = c
	p.byUserSeq[[2]int64{c.UserID, c.Seq}] = now
	p.order[c.UserID] = append(p.order[c.UserID], c.Seq)
	p.times = append(p.times, now)
	if loseAnswer {
		c.Status = http.StatusInternalServerError
		return c
	}
	c.Status = http.StatusOK
	return c
}

// Calls returns the calls answered so far that filter keeps (nil keeps all), in the order
// they were answered.
func (p *Provider) Calls(filter func(Call) bool) []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Call
	for _, c := range p.calls {
		if filter == nil || filter(c) {
			out = append(out, c)
		}
	}
	return out
}

// Delivered returns, per user, the seqs delivered, in the order they were delivered.
func (p *Provider) Delivered() map[int64][]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64][]int64, len(p.order))
	for u, seqs := range p.order {
		out[u] = append([]int64(nil), seqs...)
	}
	return out
}

// DeliveredCount is how many SMS were delivered.
func (p *Provider) DeliveredCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.times)
}

// DeliveredAt returns when (user, seq) was delivered; zero when it was not.
func (p *Provider) DeliveredAt(user, seq int64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byUserSeq[[2]int64{user, seq}]
}

// DeliveredBetween counts the SMS delivered in [from, to).
func (p *Provider) DeliveredBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	lo := sort.Search(len(p.times), func(i int) bool { return !p.times[i].Before(from) })
	hi := sort.Search(len(p.times), func(i int) bool { return !p.times[i].Before(to) })
	return hi - lo
}

// Repeats counts the calls for a key delivered before (answered with the first answer
// again, Idempotent-Replayed).
func (p *Provider) Repeats() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.repeats
}

// OutOfOrder counts delivered SMS whose seq is not the one after its user's previous one.
func (p *Provider) OutOfOrder() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, seqs := range p.order {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				n++
			}
		}
	}
	return n
}
