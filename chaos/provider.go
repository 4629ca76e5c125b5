package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
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

// smsProvider is the run's SMS provider, behind the notifiers' webhook sender. It delivers an
// SMS by writing it to notify.sms_log, where the audit reads what users got, and keeps the
// contract the README states: one delivery per Idempotency-Key (a key it has delivered
// answers 409). The phones configured to fail always get 503 (users whose SMS always fail);
// a fault can take it down for everyone or make it hang.
type smsProvider struct {
	db    *pgxpool.Pool
	fail  *regexp.Regexp
	srv   *http.Server
	url   string
	mode  atomic.Int32
	calls atomic.Int64
}

func startSMSProvider(ctx context.Context, db *pgxpool.Pool, fail *regexp.Regexp) (*smsProvider, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &smsProvider{db: db, fail: fail, url: "http://" + ln.Addr().String() + "/sms"}
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
	if p.fail.MatchString(m.Phone) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	tag, err := p.db.Exec(r.Context(), `INSERT INTO notify.sms_log (user_id, seq, phone, text, late) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING`, m.UserID, m.Seq, m.Phone, m.Text, m.Late)
	switch {
	case err != nil:
		w.WriteHeader(http.StatusServiceUnavailable) // its own database is away (a Postgres restart)
	case tag.RowsAffected() == 0:
		w.WriteHeader(http.StatusConflict)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (p *smsProvider) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}
