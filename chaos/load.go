package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/walletsaga/walletsaga/internal/ordering"
)

// client talks to the wallet replicas the way a careful client does while they crash: every
// operation carries an Idempotency-Key, and a transport error or a 5xx is retried with the
// same key, on the other replica.
type client struct {
	bases []string
	token string
	http  *http.Client
	log   *slog.Logger

	retries atomic.Int64 // requests sent again
}

// call sends one request until it gets an answer below 500, for up to give-up. It returns the
// status and the decoded body.
func (c *client) call(ctx context.Context, first int, method, path, key string, body any, giveUp time.Duration) (int, map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	deadline := time.Now().Add(giveUp)
	var last string
	for i := 0; ; i++ {
		base := c.bases[(first+i)%len(c.bases)]
		code, out, err := c.once(ctx, method, base+path, key, b)
		if err == nil && code < 500 {
			return code, out, nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("status %d: %v", code, out)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, nil, fmt.Errorf("%s %s: no answer within %s (last: %s)", method, path, giveUp, last)
		}
		c.retries.Add(1)
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
	}
}

func (c *client) once(ctx context.Context, method, url, key string, body []byte) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

// user is one of the run's users.
type user struct {
	id    int64
	phone string
}

// phoneOf gives user i a phone. Every 50th user (i % 50 == 7) has a phone configured to fail
// (it ends in 0000), so the run also exercises dead letters; the others never end in 0000.
func phoneOf(i int) string {
	if i%50 == 7 {
		return fmt.Sprintf("+86139%04d0000", i)
	}
	return fmt.Sprintf("+86138%08d", 10000000+i*7+1)
}

func createUsers(ctx context.Context, c *client, n int) ([]user, error) {
	users := make([]user, n)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range users {
		g.Go(func() error {
			locale := []string{"en", "zh-CN"}[i%2]
			phone := phoneOf(i)
			code, out, err := c.call(ctx, i, http.MethodPost, "/v1/users", "", map[string]any{"name": fmt.Sprintf("chaos user %d", i), "phone": phone, "locale": locale}, time.Minute)
			if err != nil {
				return err
			}
			id, _ := out["id"].(float64)
			if code != http.StatusCreated || id <= 0 {
				return fmt.Errorf("creating user %d: status %d: %v", i, code, out)
			}
			users[i] = user{id: int64(id), phone: phone}
			return nil
		})
	}
	return users, g.Wait()
}

// loadStats counts what the load did.
type loadStats struct {
	mu   sync.Mutex
	ops  map[string]int
	errs []string
}

func (s *loadStats) add(kind string) {
	s.mu.Lock()
	s.ops[kind]++
	s.mu.Unlock()
}

func (s *loadStats) failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops["error"]
}

func (s *loadStats) fail(err string) {
	s.mu.Lock()
	if len(s.errs) < 20 {
		s.errs = append(s.errs, err)
	}
	s.ops["error"]++
	s.mu.Unlock()
}

// drive runs the mixed load until ctx ends: workers share a rate of operations per second;
// each picks deposits (45%), purchases (30%, a fifth of them with a reference the merchant
// rejects, some larger than the balance), withdrawals (5%, a fifth of them to an account the
// gateway refuses, whose refunds are SMS of their own; some beyond the balance) or transfers
// (20%) between random users. Each worker's choices come from the seed.
func drive(ctx context.Context, c *client, users []user, seed int64, workers int, rate float64) *loadStats {
	st := &loadStats{ops: map[string]int{}}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	tokens := make(chan struct{})
	go func() {
		defer close(tokens)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(w)+1)) //nolint:gosec // G115: a seed's bits, reinterpreted, not a quantity
			for n := 0; ; n++ {
				if _, ok := <-tokens; !ok {
					return
				}
				// Requests already sent finish even when the load stops: a client does not
				// abandon an operation halfway.
				op := pick(r, users, seed, w, n)
				code, out, err := c.call(context.Background(), w, http.MethodPost, op.path, op.key, op.body, 3*time.Minute)
				switch {
				case err != nil:
					st.fail(err.Error())
				case code/100 != 2:
					st.fail(fmt.Sprintf("%s %s: status %d: %v", op.kind, op.path, code, out))
				default:
					st.add(op.kind)
				}
			}
		})
	}
	wg.Wait()
	return st
}

type operation struct {
	kind, path, key string
	body            map[string]any
}

func pick(r *rand.Rand, users []user, seed int64, w, n int) operation {
	key := fmt.Sprintf("chaos-%d-%d-%d", seed, w, n)
	u := users[r.IntN(len(users))]
	path := "/v1/users/" + strconv.FormatInt(u.id, 10)
	switch x := r.IntN(100); {
	case x < 45:
		return operation{"deposit", path + "/deposits", key, map[string]any{"amount": 500 + r.IntN(49500)}}
	case x < 75:
		ref, kind := fmt.Sprintf("order-%d-%d", w, n), "purchase"
		if r.IntN(5) == 0 {
			ref, kind = fmt.Sprintf("reject-%d-%d", w, n), "purchase_rejected"
		}
		return operation{kind, path + "/purchases", key, map[string]any{"amount": 100 + r.IntN(19900), "merchant": "chaos-shop", "reference": ref}}
	case x < 80:
		dest, kind := fmt.Sprintf("bank-%d-%d", w, n), "withdrawal"
		if r.IntN(5) == 0 {
			dest, kind = fmt.Sprintf("reject-%d-%d", w, n), "withdrawal_refused"
		}
		return operation{kind, path + "/withdrawals", key, map[string]any{"amount": 100 + r.IntN(9900), "destination": dest}}
	default:
		to := users[r.IntN(len(users))]
		for to.id == u.id {
			to = users[r.IntN(len(users))]
		}
		return operation{"transfer", "/v1/transfers", key, map[string]any{"from": u.id, "to": to.id, "amount": 100 + r.IntN(9900)}}
	}
}

// settle makes a deposit for one user of each queue of the topic and waits until each of
// them got its SMS, so that the faults hit a stack whose every queue is published and
// consumed, not one still forming (a broker's first registration, the consumers' first
// rebalance and locks). A stack that does not settle within settleTimeout fails the run.
func (r *chaosRun) settle(ctx context.Context, c *client, users []user) error {
	t0 := time.Now()
	n := r.cfg.Queues * r.cfg.Brokers
	chosen := map[int]int64{}
	for _, u := range users {
		if failPhone.MatchString(u.phone) {
			continue
		}
		if s := ordering.HashJava.Slot(strconv.FormatInt(u.id, 10), n); chosen[s] == 0 {
			chosen[s] = u.id
		}
	}
	ids := make([]int64, 0, len(chosen))
	for s, id := range chosen {
		ids = append(ids, id)
		path := "/v1/users/" + strconv.FormatInt(id, 10) + "/deposits"
		code, out, err := c.call(ctx, s, http.MethodPost, path, fmt.Sprintf("chaos-%d-settle-%d", r.cfg.Seed, s), map[string]any{"amount": 100}, time.Minute)
		if err != nil {
			return fmt.Errorf("settling: %w", err)
		}
		if code/100 != 2 {
			return fmt.Errorf("settling: %s: status %d: %v", path, code, out)
		}
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		var got int
		if err := r.ndb.QueryRow(ctx, `SELECT count(DISTINCT user_id) FROM notify.sms_log WHERE user_id = ANY($1)`, ids).Scan(&got); err != nil {
			return fmt.Errorf("settling: %w", err)
		}
		if got == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("settling: %d of the %d queues' users got their SMS within %s", got, len(ids), settleTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.printf("chaos: settled in %s: a user of each of the %d queues got an SMS; the load and the faults start\n", time.Since(t0).Round(100*time.Millisecond), len(ids))
	return nil
}

// settleTimeout bounds settle.
const settleTimeout = 3 * time.Minute
