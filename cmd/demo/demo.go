package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// client talks to the two services.
type client struct {
	wallet, notifier string
	token            string // walletsvc's service token
	readToken        string // the notifier's read token
	http             *http.Client
	// traceparent, when set, goes with the next calls: the trace they start is the demo's.
	traceparent string
}

func (c *client) call(ctx context.Context, method, url, key string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if c.traceparent != "" {
		req.Header.Set("Traceparent", c.traceparent)
	}
	switch {
	case strings.HasPrefix(url, c.wallet+"/"):
		req.Header.Set("Authorization", "Bearer "+c.token)
	case strings.HasPrefix(url, c.notifier+"/"):
		req.Header.Set("Authorization", "Bearer "+c.readToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

type user struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

type sagaView struct {
	ID    int64  `json:"id"`
	Kind  string `json:"kind"`
	State string `json:"state"`
}

type smsItem struct {
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	Text   string `json:"text"`
	Status string `json:"status"`
}

type wallet struct {
	Balance  int64  `json:"balance"`
	Currency string `json:"currency"`
	LastSeq  int64  `json:"last_seq"`
}

// step is one operation of the scenario, run to its end (?wait=true).
func (c *client) step(ctx context.Context, path, key string, body map[string]any, want string) error {
	var s sagaView
	code, err := c.call(ctx, "POST", c.wallet+path+"?wait=true", key, body, &s)
	if err != nil {
		return err
	}
	if code != http.StatusOK || s.State != want {
		return fmt.Errorf("%s: saga %d ended %q (HTTP %d), want %q", path, s.ID, s.State, code, want)
	}
	return nil
}

// expectation is what a user's SMS log must be at the end.
type expectation struct {
	kinds    []walletevent.Kind
	statuses []string
	balance  int64
}

func play(ctx context.Context, cfg config, out io.Writer) error {
	c := &client{wallet: strings.TrimRight(cfg.WalletsvcURL, "/"), notifier: strings.TrimRight(cfg.NotifierURL, "/"),
		token: cfg.ServiceToken, readToken: cfg.ReadToken, http: &http.Client{Timeout: 20 * time.Second}}
	run := time.Now().Format("150405")
	// Phone numbers unique per run whose last digit is never 0 (numbers ending in 0000 are the
	// notifier's failure switch).
	stamp := time.Now().UnixNano() % 1_000_0000

	fmt.Fprintf(out, "walletsaga demo: walletsvc %s, notifier %s\n\n", c.wallet, c.notifier)
	var a, b user
	if _, err := c.call(ctx, "POST", c.wallet+"/v1/users", "", map[string]any{"name": "Alice " + run, "phone": fmt.Sprintf("+86138%07d1", stamp), "locale": "en"}, &a); err != nil {
		return err
	}
	if _, err := c.call(ctx, "POST", c.wallet+"/v1/users", "", map[string]any{"name": "Bob " + run, "phone": fmt.Sprintf("+86139%07d2", stamp), "locale": "en"}, &b); err != nil {
		return err
	}
	fmt.Fprintf(out, "users: A = %s (id %d), B = %s (id %d)\n", a.Name, a.ID, b.Name, b.ID)

	fmt.Fprintf(out, "A: top up 100.00, then spend 50.00 — ten times\n")
	traceID := newTraceID()
	for i := 1; i <= 10; i++ {
		if i == 1 {
			// A's first top-up is made in a trace of the demo's, to be followed to its SMS.
			c.traceparent = "00-" + traceID + "-" + newTraceID()[:16] + "-01"
		}
		err := c.step(ctx, fmt.Sprintf("/v1/users/%d/deposits", a.ID), fmt.Sprintf("demo-%s-a-dep-%d", run, i), map[string]any{"amount": 10000}, "completed")
		c.traceparent = ""
		if err != nil {
			return err
		}
		if err := c.step(ctx, fmt.Sprintf("/v1/users/%d/purchases", a.ID), fmt.Sprintf("demo-%s-a-buy-%d", run, i),
			map[string]any{"amount": 5000, "merchant": "coffee-shop", "reference": fmt.Sprintf("order-%s-%d", run, i)}, "completed"); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "B: deposit 100.00, then 4.04 (its SMS is set to fail), then 50.00\n")
	for i, amount := range []int64{10000, 404, 5000} {
		if err := c.step(ctx, fmt.Sprintf("/v1/users/%d/deposits", b.ID), fmt.Sprintf("demo-%s-b-dep-%d", run, i), map[string]any{"amount": amount}, "completed"); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "B: buy for 30.00 from a merchant that rejects the order (refund follows)\n")
	if err := c.step(ctx, fmt.Sprintf("/v1/users/%d/purchases", b.ID), fmt.Sprintf("demo-%s-b-reject", run),
		map[string]any{"amount": 3000, "merchant": "grumpy-shop", "reference": "reject-" + run}, "compensated"); err != nil {
		return err
	}
	fmt.Fprintf(out, "A → B: transfer 25.00\n")
	if err := c.step(ctx, "/v1/transfers", fmt.Sprintf("demo-%s-transfer", run), map[string]any{"from": a.ID, "to": b.ID, "amount": 2500}, "completed"); err != nil {
		return err
	}
	fmt.Fprintf(out, "A: withdraw 20.00 to her bank account\n\n")
	if err := c.step(ctx, fmt.Sprintf("/v1/users/%d/withdrawals", a.ID), fmt.Sprintf("demo-%s-a-withdraw", run),
		map[string]any{"amount": 2000, "destination": "demo bank 6222 0000 0001"}, "completed"); err != nil {
		return err
	}

	// The kinds are walletevent's own names, so a renamed kind fails to build here rather
	// than fail the story.
	var aKinds []walletevent.Kind
	var aStatuses []string
	for i := 0; i < 10; i++ {
		aKinds = append(aKinds, walletevent.Deposit, walletevent.Purchase)
		aStatuses = append(aStatuses, "sent", "sent")
	}
	want := map[int64]expectation{
		a.ID: {kinds: append(aKinds, walletevent.TransferOut, walletevent.Withdrawal), statuses: append(aStatuses, "sent", "sent"), balance: 50000 - 2500 - 2000},
		b.ID: {kinds: []walletevent.Kind{walletevent.Deposit, walletevent.Deposit, walletevent.Deposit, walletevent.Purchase, walletevent.Refund, walletevent.TransferIn},
			statuses: []string{"sent", "dead_lettered", "sent", "sent", "sent", "sent"}, balance: 15404 + 2500},
	}
	var problems []string
	for _, u := range []user{a, b} {
		items, err := c.waitSMS(ctx, u.ID, len(want[u.ID].kinds), 60*time.Second)
		if err != nil {
			problems = append(problems, err.Error())
		}
		var w wallet
		if _, err := c.call(ctx, "GET", fmt.Sprintf("%s/v1/users/%d/wallet", c.wallet, u.ID), "", nil, &w); err != nil {
			return err
		}
		printLog(out, u, items, w)
		problems = append(problems, check(u, items, w, want[u.ID])...)
	}
	c.printTrace(ctx, out, cfg.TracesURL, traceID)
	printLinks(out, cfg, c, a.ID, b.ID)
	if len(problems) > 0 {
		fmt.Fprintf(out, "NOT AS EXPECTED:\n  %s\n", strings.Join(problems, "\n  "))
		return errors.New("the SMS logs are not as expected")
	}
	fmt.Fprintf(out, "OK: A got %d SMS in order; B's 4.04 SMS was dead-lettered and the next one still arrived; the rejected purchase was refunded by SMS.\n", len(want[a.ID].kinds))
	return nil
}

// printLinks prints where to look next, at the URLs a person opens (cfg's link URLs). The
// APIs need their tokens: they are shown only when they are the dev stack's own, never a real
// one. A link to a console may carry a token in its fragment, which browsers never send to
// the server.
func printLinks(out io.Writer, cfg config, c *client, aID, bID int64) {
	wallet, notifier := strings.TrimRight(cfg.WalletsvcLinkURL, "/"), strings.TrimRight(cfg.NotifierLinkURL, "/")
	token, readToken, page := "$SERVICE_TOKEN", "$READ_TOKEN", notifier+"/ (it asks for the notifier's READ_TOKEN)"
	if c.token == devServiceToken {
		token = devServiceToken
	}
	if c.readToken == demoReadToken {
		readToken, page = demoReadToken, notifier+"/#token="+demoReadToken
	}
	fmt.Fprintf(out, "Open the live SMS page:   %s\n", page)
	switch cfg.OperatorToken {
	case devOperatorToken:
		fmt.Fprintf(out, "Saga console (operator):  %s/#token=%s\n", wallet, devOperatorToken)
		fmt.Fprintf(out, "SMS console (operator):   %s/#token=%s (replay, skip)\n", notifier, devOperatorToken)
	case "":
	default:
		fmt.Fprintf(out, "Saga console (operator):  %s/ (it asks for an operator's token)\n", wallet)
	}
	fmt.Fprintf(out, "SMS log API:              curl -H 'Authorization: Bearer %s' %s/v1/users/%d/sms\n", readToken, notifier, bID)
	fmt.Fprintf(out, "Dead letters:             curl -H 'Authorization: Bearer %s' %s/v1/dead-letters\n", readToken, notifier)
	fmt.Fprintf(out, "SMS log on the terminal:  WALLETSAGA_ENV=dev go run ./cmd/notifier sms-log --user %d --follow\n", aID)
	fmt.Fprintf(out, "Wallet API:               curl -H 'Authorization: Bearer %s' %s/v1/users/%d/wallet\n\n", token, wallet, aID)
}

// waitSMS polls the user's SMS log until it has n finished entries or the timeout passes.
func (c *client) waitSMS(ctx context.Context, userID int64, n int, timeout time.Duration) ([]smsItem, error) {
	deadline := time.Now().Add(timeout)
	for {
		var page struct {
			Items []smsItem `json:"items"`
		}
		if _, err := c.call(ctx, "GET", fmt.Sprintf("%s/v1/users/%d/sms", c.notifier, userID), "", nil, &page); err != nil {
			return nil, err
		}
		if len(page.Items) >= n {
			return page.Items, nil
		}
		if time.Now().After(deadline) {
			return page.Items, fmt.Errorf("user %d: %d of %d SMS after %s", userID, len(page.Items), n, timeout)
		}
		select {
		case <-ctx.Done():
			return page.Items, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func printLog(out io.Writer, u user, items []smsItem, w wallet) {
	fmt.Fprintf(out, "SMS log of %s (id %d) — balance %s %s\n", u.Name, u.ID, money(w.Balance), w.Currency)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SEQ\tSTATUS\tSMS")
	for _, it := range items {
		status := it.Status
		if status == "dead_lettered" {
			status = "DEAD-LETTERED"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", it.Seq, status, it.Text)
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
}

func check(u user, items []smsItem, w wallet, want expectation) []string {
	var p []string
	if len(items) != len(want.kinds) {
		p = append(p, fmt.Sprintf("%s: %d SMS, want %d", u.Name, len(items), len(want.kinds)))
	}
	for i, it := range items {
		if i >= len(want.kinds) {
			break
		}
		if it.Seq != int64(i+1) {
			p = append(p, fmt.Sprintf("%s: entry %d has seq %d", u.Name, i+1, it.Seq))
		}
		if it.Kind != string(want.kinds[i]) || it.Status != want.statuses[i] {
			p = append(p, fmt.Sprintf("%s: seq %d is %s/%s, want %s/%s", u.Name, it.Seq, it.Kind, it.Status, want.kinds[i], want.statuses[i]))
		}
	}
	if w.Balance != want.balance {
		p = append(p, fmt.Sprintf("%s: balance %s, want %s", u.Name, money(w.Balance), money(want.balance)))
	}
	return p
}

func money(minor int64) string {
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	return fmt.Sprintf("%s%d.%02d", sign, minor/100, minor%100)
}

// newTraceID returns 16 random bytes in hex: a W3C trace id.
func newTraceID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// printTrace prints the trace of A's first top-up as the demo's OTLP receiver has it, once
// the SMS's send span and the inbox's arrival span have arrived; with no receiver of the
// demo's, just its id.
func (c *client) printTrace(ctx context.Context, out io.Writer, tracesURL, traceID string) {
	if tracesURL == "" {
		fmt.Fprintf(out, "A's first top-up is trace %s: find it in your OTLP back end, if the services export there (OTEL_EXPORTER_OTLP_ENDPOINT).\n\n", traceID)
		return
	}
	var tree string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(tracesURL, "/")+"/trees/"+traceID, nil)
		if err != nil {
			break
		}
		resp, err := c.http.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tree = string(b)
			// The send span can end before the inbox write's (the write hands its user to a
			// worker before its span ends): wait for both.
			if resp.StatusCode == http.StatusOK && strings.Contains(tree, "sms.send") && strings.Contains(tree, "inbox.arrive") {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintf(out, "The trace of A's first top-up (trace id %s), from its HTTP request to its SMS, as both services exported it:\n", traceID)
	for _, line := range strings.Split(strings.TrimRight(tree, "\n"), "\n") {
		fmt.Fprintf(out, "  %s\n", line)
	}
	fmt.Fprintln(out)
}
