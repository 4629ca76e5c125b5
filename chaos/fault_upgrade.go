package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The upgrade's pace: after each process it replaces, the stack runs upgradeDwell under the
// load before the next; one replacement (a graceful stop, a start, the first one's
// migrations) takes about upgradeStep on a busy machine.
const (
	upgradeDwell = 5 * time.Second
	upgradeStep  = 6 * time.Second
	// upgradeProbing is about how long the probes take (see probeMixedStack).
	upgradeProbing = 10 * time.Second
)

// upgradeLasts is about how long the upgrade of a stack with replicas of each service takes:
// every walletsvc and notifier replaced, then every walletsvc restarted.
func upgradeLasts(replicas int) time.Duration {
	return time.Duration(3*max(replicas, 2))*(upgradeDwell+upgradeStep) + upgradeProbing
}

// placeUpgrade draws when the upgrade starts, from a generator of its own so that the rest
// of each seed's plan is what it was without it: after the first twentieth of the run,
// ending by 85% of it (the new release takes the rest of the faults), and clear of the
// freezes, whose measures a process replaced under them would spoil. Where no such start
// is left (about one one-broker plan in twelve), clear of the broker's freeze only: the
// frozen notifier's replacement then waits until it is resumed. A run too short for either
// (while developing) starts it at the first twentieth.
func placeUpgrade(seed int64, o PlanOptions, faults []Fault) Fault {
	r := rand.New(rand.NewPCG(uint64(seed), 0x75706772616465)) //nolint:gosec // G115: a seed's bits, reinterpreted, not a quantity
	f := Fault{Kind: Upgrade, Down: upgradeLasts(o.Replicas)}
	lo, hi := o.Duration/20, o.Duration*85/100-f.Down
	f.At = lo
	if hi <= lo {
		return f
	}
	for _, clear := range [][]FaultKind{{FreezeBroker, FreezeNotifier}, {FreezeBroker}} {
		for range 1000 {
			f.At = (lo + time.Duration(r.Int64N(int64(hi-lo)))).Round(100 * time.Millisecond)
			if upgradeFits(f, faults, clear) {
				return f
			}
		}
		for at := lo; at <= hi; at += time.Second {
			if f.At = at; upgradeFits(f, faults, clear) {
				return f
			}
		}
	}
	f.At = lo
	return f
}

// upgradeFits reports whether the upgrade f keeps clear of every fault of the kinds clear.
func upgradeFits(f Fault, faults []Fault, clear []FaultKind) bool {
	s := span{f.At, f.At + f.Down}
	for _, g := range faults {
		if slices.Contains(clear, g.Kind) && s.overlaps(footprint(g)) {
			return false
		}
	}
	return true
}

// upgradeFault (upgrade) rolls the stack, which the run started on the previous release's
// binaries (-upgrade-from, built from git), to this release's (-bin), under the load and the
// other faults, as docs/OPERATIONS.md ("Upgrading") tells an operator to:
//
//  1. Expand: each walletsvc and then each notifier in turn, one process at a time, is
//     stopped gracefully and a new one started in its place, the walletsvc with
//     EVENT_VERSION=1. The first new walletsvc applies the wallet's new migrations and the
//     first new notifier the notifier's, while processes of the previous release run on
//     both sides; old and new run side by side on one database and one broker until the
//     last old process is replaced.
//  2. While they do (after the first of each is new), probeMixedStack: an old walletsvc and
//     an old notifier are killed and start again on the newer schemas, and users sign up,
//     are paid and transfer through old and new walletsvc.
//  3. Contract: each walletsvc is restarted in turn without EVENT_VERSION (version 2
//     events, the wallet's epochs).
//
// The audit then holds the whole run to its counts, the upgrade included; the run fails on
// any message the notifier could not decode (bad messages), which the previous release's
// notifier records for every body of a version it does not read.
var upgradeFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, _ Fault, e *executed) {
		e.err = r.upgrade(ctx)
	},
}

// upgrade carries the upgrade fault out.
func (r *chaosRun) upgrade(ctx context.Context) error {
	var wallets, notifiers []*slot
	for _, name := range r.names {
		if strings.HasPrefix(name, "walletsvc") {
			wallets = append(wallets, r.slots[name])
		} else {
			notifiers = append(notifiers, r.slots[name])
		}
	}
	bin := func(name string) string { return filepath.Join(r.cfg.BinDir, strings.SplitN(name, "-", 2)[0]) }
	step := func(s *slot, what string, env func(map[string]string)) error {
		t0 := time.Now()
		err := s.replace(ctx, bin(s.name), env, 30*time.Second)
		status := "done"
		if err != nil {
			status = "FAILED: " + firstLine(err.Error())
		}
		r.printf("chaos: +%5.1fs   upgrade: %-48s took %5.1fs %s\n", t0.Sub(r.start).Seconds(), s.name+" "+what, time.Since(t0).Seconds(), status)
		sleep(ctx, upgradeDwell)
		return err
	}
	writeV1 := func(env map[string]string) { env["EVENT_VERSION"] = "1" }
	writeV2 := func(env map[string]string) { delete(env, "EVENT_VERSION") }
	for i := range wallets {
		if err := step(wallets[i], "→ this release, EVENT_VERSION=1", writeV1); err != nil {
			return err
		}
		r.untilProviderAnswers(ctx)
		if err := step(notifiers[i], "→ this release", nil); err != nil {
			return err
		}
		if i == 0 {
			// The old notifier to kill: one that runs (notifier-2 may be scaled away).
			oldNotifier := notifiers[1]
			for _, n := range notifiers[1:] {
				if n.running() {
					oldNotifier = n
					break
				}
			}
			r.probeMixedStack(ctx, wallets[1], oldNotifier, wallets[0])
		}
	}
	for _, w := range wallets {
		if err := step(w, "restarted without EVENT_VERSION (version 2)", writeV2); err != nil {
			return err
		}
	}
	return nil
}

// probeMixedStack tries what the previous release's processes do on the new schemas, while
// this release's run beside them: oldWallet and oldNotifier (still of the previous release)
// are killed and started again; then a user signs up through oldWallet and one through
// newWallet (ids from the clock, migration 00028, which the previous release's insert gets
// too), each is paid through the walletsvc it signed up on, and each transfers to the other
// through oldWallet, as a careful client does: a refusal (5xx) is sent again, same key, to
// newWallet. What each did is printed, and summed up at the end; their SMS are audited with
// everyone else's.
func (r *chaosRun) probeMixedStack(ctx context.Context, oldWallet, oldNotifier, newWallet *slot) {
	t0 := time.Now()
	var lines []string
	say := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		lines = append(lines, line)
		r.printf("chaos: +%5.1fs   upgrade: %s\n", time.Since(r.start).Seconds(), line)
	}
	r.untilProviderAnswers(ctx)
	for _, s := range []*slot{oldWallet, oldNotifier} {
		if !s.running() {
			say("%s (previous release) not killed: it is not running (scaled away)", s.name)
			continue
		}
		if err := s.crash(ctx, 500*time.Millisecond); err != nil {
			say("%s (previous release) killed and started again on the new schema: FAILED: %s", s.name, firstLine(err.Error()))
		} else {
			say("%s (previous release) killed and started again on the new schema", s.name)
		}
	}
	old := &client{token: serviceToken, http: &http.Client{Timeout: 30 * time.Second}, log: r.log, bases: []string{oldWallet.url(), newWallet.url()}}
	oldOnly := &client{token: serviceToken, http: old.http, log: r.log, bases: []string{oldWallet.url()}}
	newOnly := &client{token: serviceToken, http: old.http, log: r.log, bases: []string{newWallet.url()}}
	type signup struct {
		via  *client
		name string
		id   int64
	}
	users := []*signup{{via: oldOnly, name: oldWallet.name + " (previous release)"}, {via: newOnly, name: newWallet.name + " (this release)"}}
	for i, u := range users {
		phone := fmt.Sprintf("+86137%08d", 10000000+int(r.cfg.Seed%1000)*10+i)
		code, out, err := u.via.call(ctx, 0, http.MethodPost, "/v1/users", "", map[string]any{"name": fmt.Sprintf("upgrade probe %d", i), "phone": phone, "locale": "en"}, time.Minute)
		id, _ := out["id"].(float64)
		if err != nil || code != http.StatusCreated || id <= 0 {
			say("sign-up through %s: FAILED: status %d %v %v", u.name, code, out, err)
			return
		}
		u.id = int64(id)
		code, out, err = u.via.call(ctx, 0, http.MethodPost, "/v1/users/"+strconv.FormatInt(u.id, 10)+"/deposits", fmt.Sprintf("chaos-%d-upgrade-deposit-%d", r.cfg.Seed, i), map[string]any{"amount": 10000}, time.Minute)
		say("user %d signed up through %s (an id of the clock: %t), paid 100.00 through it: status %d%s", u.id, u.name, u.id > 1<<40, code, errText(out, err))
	}
	// The transfers need the deposits done (a gateway outage may hold them up to a minute).
	for _, u := range users {
		if !paid(ctx, newOnly, u.id, 10000, 90*time.Second) {
			say("user %d: the deposit is not done after 90s; transferring anyway", u.id)
		}
	}
	for i, u := range users {
		to := users[1-i]
		key := fmt.Sprintf("chaos-%d-upgrade-transfer-%d", r.cfg.Seed, i)
		body := map[string]any{"from": u.id, "to": to.id, "amount": 1000}
		code, out, err := oldOnly.call(ctx, 0, http.MethodPost, "/v1/transfers", key, body, 5*time.Second)
		first := fmt.Sprintf("status %d%s", code, errText(out, err))
		if err != nil || code >= 500 {
			code, out, err = old.call(ctx, 1, http.MethodPost, "/v1/transfers", key, body, time.Minute)
			first += fmt.Sprintf("; sent again, same key, to %s: status %d%s", newWallet.name, code, errText(out, err))
		}
		say("transfer of 10.00 from user %d to user %d through %s: %s", u.id, to.id, oldWallet.name+" (previous release)", first)
	}
	r.mu.Lock()
	for _, l := range lines {
		r.summary = append(r.summary, "upgrade: "+l)
	}
	r.mu.Unlock()
	r.printf("chaos: +%5.1fs   upgrade: probes took %.1fs\n", time.Since(r.start).Seconds(), time.Since(t0).Seconds())
}

// paid polls user's wallet through c until its balance is at least amount, for up to giveUp.
func paid(ctx context.Context, c *client, user, amount int64, giveUp time.Duration) bool {
	deadline := time.Now().Add(giveUp)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		code, out, err := c.call(ctx, 0, http.MethodGet, "/v1/users/"+strconv.FormatInt(user, 10)+"/wallet", "", nil, 10*time.Second)
		if balance, _ := out["balance"].(float64); err == nil && code == http.StatusOK && int64(balance) >= amount {
			return true
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return false
}

// providerOut wraps set, which turns an outage or a hang of the SMS provider on and off, so
// that the run knows while one is on (untilProviderAnswers).
func (r *chaosRun) providerOut(set func(bool)) func(bool) {
	return func(on bool) {
		if on {
			r.providerOutages.Add(1)
			set(true)
			return
		}
		set(false)
		r.providerOutages.Add(-1)
	}
}

// untilProviderAnswers waits while the SMS provider is out or hangs. A notifier started then
// sends to the users it claims before its breaker has seen the provider fail, and the run
// dead-letters an SMS after 6 attempts however quick they were (SMS_DEAD_LETTER_AFTER 0s):
// the upgrade's start of a notifier and two kills of it in one 30 s outage, each adding an
// attempt, dead-lettered three healthy SMS (seed 860377547). The upgrade starts none then;
// in production an SMS is not dead-lettered before SMS_DEAD_LETTER_AFTER has passed too.
func (r *chaosRun) untilProviderAnswers(ctx context.Context) {
	t0 := time.Now()
	for r.providerOutages.Load() > 0 && ctx.Err() == nil {
		sleep(ctx, 200*time.Millisecond)
	}
	if d := time.Since(t0); d > time.Second {
		r.printf("chaos: +%5.1fs   upgrade: waited %.1fs for the SMS provider to answer again\n", time.Since(r.start).Seconds(), d.Seconds())
	}
}

// errText is what a probe's answer adds to its status: the body of a refusal, or the error.
func errText(out map[string]any, err error) string {
	switch {
	case err != nil:
		return ": " + firstLine(err.Error())
	case out["error"] != nil:
		return fmt.Sprintf(" %v", out["error"])
	}
	return ""
}

// replace stops the slot's process gracefully (SIGTERM, SIGKILL after timeout) and starts bin
// in its place, on the same address, with the slot's environment as env (when not nil)
// changes a copy of it. A slot scaled away only takes bin and env, for its next start.
func (s *slot) replace(ctx context.Context, bin string, env func(map[string]string), timeout time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bin = bin
	if env != nil {
		s.env = maps.Clone(s.env)
		env(s.env)
	}
	if !s.wanted {
		return nil
	}
	var stopErr error
	if p := s.p; p != nil {
		s.p = nil
		if err := p.Stop(timeout); err != nil {
			stopErr = fmt.Errorf("%s: stopping: %w", s.name, err)
		}
	}
	if err := s.startLocked(ctx); err != nil {
		return err
	}
	return stopErr
}

// badMessages counts the messages the notifiers could not decode (notify.bad_messages), and
// returns a defect when there are any: the wallet writes none, so each is a balance event
// a notifier refused, as a notifier of the previous release does a version 2 body.
func (r *chaosRun) badMessages(ctx context.Context) []string {
	var n int
	var reasons []string
	err := r.ndb.QueryRow(ctx, `SELECT count(*), COALESCE(array_agg(DISTINCT left(reason, 120)) FILTER (WHERE reason IS NOT NULL), '{}') FROM notify.bad_messages`).Scan(&n, &reasons)
	if err != nil {
		return []string{"counting the bad messages: " + firstLine(err.Error())}
	}
	r.printf("chaos: bad_messages=%d (messages a notifier could not decode)\n", n)
	if n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d messages a notifier could not decode: %s", n, strings.Join(reasons, "; "))}
}
