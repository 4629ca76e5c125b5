package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/testutil/badinput"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// The operator alice, as each binary lists her here (OPERATOR_TOKENS): each service has a
// list of its own, so she has a token for walletsvc and another for the notifier, neither
// of them another secret of the binary, as their configuration requires.
const (
	e2eOperator              = "alice"
	e2eWalletOperatorToken   = "e2e-alice-walletsvc-token-0123456789"
	e2eNotifierOperatorToken = "e2e-alice-notifier-token-0123456789"
)

// operatorEnv is the environment that lists alice with token as a binary's operator.
func operatorEnv(token string) map[string]string {
	return map[string]string{"OPERATOR_TOKENS": httpx.OperatorEntry(e2eOperator, token)}
}

// TestBadInputCorpusChangesNothing replays the bad-input corpus against the real binaries:
// walletsvc's shared corpus (badinput.Cases, also run in-process by httpapi's tests), the
// cases that need a live stack (a wallet filled to the largest balance by real deposits, an
// Idempotency-Key already used), and the notifier's operator and read endpoints. Every
// request must get a 4xx with a JSON error naming what is wrong, and the database of both
// services (every table, see badinput.Fingerprint) must be exactly as before.
func TestBadInputCorpusChangesNothing(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := newStack(t)
	w := s.start("walletsvc", operatorEnv(e2eWalletOperatorToken))
	n := s.start("notifier", operatorEnv(e2eNotifierOperatorToken))
	a := api{t: t, base: func() string { return w.url }}

	// The world the corpus runs against, built through the API where the API can build it.
	user := a.createUser("Corpus User", okPhone(1))
	full := a.createUser("Full Wallet", okPhone(2))
	a.depositWait(user, 10000, "corpus-key")
	attention := s.needsAttention(a, user)
	s.fillToMaxBalance(a, full)
	s.settle(120 * time.Second)
	ctx := context.Background()
	before := badinput.Fingerprint(t, ctx, s.pool)
	for _, table := range migratedTables {
		require.Contains(t, before, table, "the fingerprint covers every table the migrations create")
	}

	fx := badinput.Fixture{User: user, Other: full, Operator: e2eOperator, OperatorToken: e2eWalletOperatorToken, NeedsAttention: attention}
	walletCases := append(badinput.Cases(fx), liveWalletCases(user, full)...)
	notifierCases := notifierCases(user)
	corpusStart := time.Now()
	t.Run("walletsvc", func(t *testing.T) { badinput.Run(t, http.DefaultClient, w.url, devServiceToken, walletCases) })
	t.Run("notifier", func(t *testing.T) { badinput.Run(t, http.DefaultClient, n.url, "", notifierCases) })
	corpusTook := time.Since(corpusStart)

	require.Equal(t, before, badinput.Fingerprint(t, ctx, s.pool), "the bad requests changed the database")
	var balance, ledger string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT balance::text, (SELECT sum(amount) FROM ledger_entries WHERE user_id = $1)::text
		FROM wallets WHERE user_id = $1`, full).Scan(&balance, &ledger))
	require.Equal(t, strconv.FormatInt(int64(wallet.MaxBalance), 10), balance, "the full wallet holds the largest balance")
	require.Equal(t, balance, ledger, "balance = sum(ledger)")
	require.Equal(t, 1, s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1 AND text LIKE '%Balance: 92233720368547758.07 CNY%'`, full),
		"the SMS of the deposit that filled the wallet states the largest balance")
	t.Logf("bad-input corpus: %d walletsvc cases, %d notifier cases, %d in all, replayed in %s; test took %s",
		len(walletCases), len(notifierCases), len(walletCases)+len(notifierCases), corpusTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// migratedTables are the tables migrations/ creates (and the provider simulator's, whose
// charges and orders are in the stack's database too), at the least what the fingerprint
// (which lists them from the catalogue) must cover.
var migratedTables = []string{
	"public.users", "public.wallets", "public.ledger_entries", "public.wallet_events", "public.wallet_operations",
	"public.idempotency_keys", "public.sagas", "public.audit", "providersim.charges", "providersim.orders",
	"notify.progress", "notify.notifications", "notify.sms_log", "notify.bad_messages", "notify.audit",
}

// liveWalletCases are walletsvc cases that need what only the live stack has here: full is
// at the largest balance (through real deposits), and user deposited 10000 with the
// Idempotency-Key "corpus-key".
func liveWalletCases(user, full int64) []badinput.Case {
	over := func(name, path, key, body string) badinput.Case {
		c := badinput.Case{Name: name, Method: "POST", Path: path, Body: body, Status: 422, Code: "balance_overflow",
			Msg: "a balance may be at most 9223372036854775807 minor units (92233720368547758.07 CNY), and this one can take at most 0 more"}
		if key != "" {
			c.Header = []string{"Idempotency-Key", key}
		}
		return c
	}
	reused := func(name, path, body string) badinput.Case {
		return badinput.Case{Name: name, Method: "POST", Path: path, Body: body, Header: []string{"Idempotency-Key", "corpus-key"},
			Status: 422, Code: "unprocessable", Msg: `Idempotency-Key "corpus-key" was already used with a different request`}
	}
	fullDeposits := fmt.Sprintf("/v1/users/%d/deposits", full)
	userPath := func(op string) string { return fmt.Sprintf("/v1/users/%d/%s", user, op) }
	return []badinput.Case{
		over("deposit beyond the largest balance", fullDeposits, "", `{"amount":1}`),
		over("deposit beyond the largest balance, waited for, with a key", fullDeposits+"?wait=true", "overflow-1",
			fmt.Sprintf(`{"amount":%d}`, int64(wallet.MaxAmount))),
		over("transfer beyond the payee's largest balance", "/v1/transfers", "", fmt.Sprintf(`{"from":%d,"to":%d,"amount":1}`, user, full)),
		reused("idempotency key reused with another amount", userPath("deposits"), `{"amount":10001}`),
		reused("idempotency key reused with another source", userPath("deposits"), `{"amount":10000,"source":"card_declined"}`),
		reused("idempotency key reused for a purchase", userPath("purchases"), `{"amount":10000,"merchant":"m","reference":"r"}`),
		reused("idempotency key reused for a transfer", "/v1/transfers", fmt.Sprintf(`{"from":%d,"to":%d,"amount":100}`, user, full)),
	}
}

// notifierCases are the notifier's operator endpoints without an operator's token, with a
// wrong one (walletsvc's service token and alice's walletsvc token among them), with an
// X-Operator header naming someone else, and with bad bodies or ids; its read endpoints
// without the read token or with a wrong one, and with the read token but injection strings
// in ids and query parameters.
func notifierCases(user int64) []badinput.Case {
	replay := fmt.Sprintf("/v1/dead-letters/%d/1/replay", user)
	skip := fmt.Sprintf("/v1/gate/%d/skip", user)
	const reason = `{"reason":"provider outage over"}`
	const skipBody = `{"seq":1,"reason":"lost in broker failover"}`
	admin := func(more ...string) []string {
		return append([]string{"Authorization", "Bearer " + e2eNotifierOperatorToken}, more...)
	}
	read := []string{"Authorization", "Bearer " + e2eReadToken}
	reads := []badinput.Case{
		{Name: "SMS log without a token", Method: "GET", Path: fmt.Sprintf("/v1/users/%d/sms", user), Status: 401, Code: "unauthorized", Msg: "a read token is required"},
		{Name: "SMS feed with walletsvc's service token", Method: "GET", Path: "/v1/sms", Header: []string{"Authorization", "Bearer " + devServiceToken}, Status: 403, Code: "forbidden", Msg: "read token is not valid"},
		{Name: "gate with a wrong token", Method: "GET", Path: "/v1/gate", Header: []string{"Authorization", "Bearer wrong-token-wrong-token"}, Status: 403, Code: "forbidden", Msg: "read token is not valid"},
		{Name: "dead letters with a Basic token", Method: "GET", Path: "/v1/dead-letters", Header: []string{"Authorization", "Basic " + e2eReadToken}, Status: 401, Code: "unauthorized", Msg: "Bearer"},
		{Name: "audit without a token", Method: "GET", Path: "/v1/audit", Status: 401, Code: "unauthorized", Msg: "a read token is required"},
		{Name: "a bad message without a token", Method: "GET", Path: "/v1/bad-messages/C0A8000100002A9F0000000000000001", Status: 401, Code: "unauthorized", Msg: "a read token is required"},
		{Name: "replay with the read token", Method: "POST", Path: replay, Body: reason, Header: append(slices.Clone(read), "X-Operator", e2eOperator), Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "DELETE on the SMS log", Method: "DELETE", Path: fmt.Sprintf("/v1/users/%d/sms", user), Header: read, Status: 405, Code: "method_not_allowed", Msg: "Allow header"},
	}
	withRead := func(cs []badinput.Case) []badinput.Case {
		for i := range cs {
			cs[i].Header = append(slices.Clone(read), cs[i].Header...)
		}
		return cs
	}
	return append(append(reads, withRead([]badinput.Case{
		{Name: "SMS log with SQL in the user id", Method: "GET", Path: "/v1/users/1%27%20OR%20%271%27=%271/sms", Status: 400, Code: "invalid", Msg: "user id must be a positive integer"},
		{Name: "SMS feed with SQL in the cursor", Method: "GET", Path: "/v1/sms?cursor=%27%20OR%201=1--", Status: 400, Code: "invalid", Msg: "is not one this API returned"},
		// net/url drops a ';'-separated pair without a word: the cursor would be ignored and the
		// feed restart from its first page.
		{Name: "SMS feed with a ';' in the query", Method: "GET", Path: "/v1/sms?cursor=5;x=1", Status: 400, Code: "invalid", Msg: "query string is malformed"},
		{Name: "SMS log of user +5", Method: "GET", Path: "/v1/users/+5/sms", Status: 400, Code: "invalid", Msg: "user id must be a positive integer"},
		{Name: "SMS feed with limit +3", Method: "GET", Path: "/v1/sms?limit=%2B3", Status: 400, Code: "invalid", Msg: "limit must be a positive integer"},
		{Name: "SMS feed with an empty limit", Method: "GET", Path: "/v1/sms?limit=", Status: 400, Code: "invalid", Msg: "limit must be a positive integer"},
		{Name: "users with a limit over 100", Method: "GET", Path: "/v1/users?limit=101", Status: 400, Code: "invalid", Msg: "limit must be between 1 and 100"},
		{Name: "dead letters with SQL in the limit", Method: "GET", Path: "/v1/dead-letters?limit=1%20OR%201=1", Status: 400, Code: "invalid", Msg: "limit must be a positive integer"},
		{Name: "audit with a negative limit", Method: "GET", Path: "/v1/audit?limit=-1", Status: 400, Code: "invalid", Msg: "limit must be a positive integer"},
		{Name: "bad messages with a limit over 100", Method: "GET", Path: "/v1/bad-messages?limit=101", Status: 400, Code: "invalid", Msg: "limit must be between 1 and 100"},
		{Name: "a bad message with SQL in its id", Method: "GET", Path: "/v1/bad-messages/1%27%20OR%20%271%27=%271", Status: 400, Code: "invalid", Msg: "msg_id must be"},
	})...), []badinput.Case{
		{Name: "replay without a token", Method: "POST", Path: replay, Body: reason, Status: 401, Code: "unauthorized", Msg: "an operator token is required"},
		{Name: "replay with a wrong token", Method: "POST", Path: replay, Body: reason, Header: []string{"Authorization", "Bearer wrong-token-wrong-token", "X-Operator", e2eOperator}, Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "replay with walletsvc's service token", Method: "POST", Path: replay, Body: reason, Header: []string{"Authorization", "Bearer " + devServiceToken, "X-Operator", e2eOperator}, Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "replay with alice's walletsvc token", Method: "POST", Path: replay, Body: reason, Header: []string{"Authorization", "Bearer " + e2eWalletOperatorToken}, Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "replay with an empty bearer", Method: "POST", Path: replay, Body: reason, Header: []string{"Authorization", "Bearer "}, Status: 401, Code: "unauthorized", Msg: "an operator token is required"},
		{Name: "skip without a token", Method: "POST", Path: skip, Body: skipBody, Status: 401, Code: "unauthorized", Msg: "an operator token is required"},
		{Name: "skip with a wrong token", Method: "POST", Path: skip, Body: skipBody, Header: []string{"Authorization", "Bearer " + e2eNotifierOperatorToken + "-not"}, Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "skip with X-Operator naming someone else", Method: "POST", Path: skip, Body: skipBody, Header: admin("X-Operator", "bob"), Status: 400, Code: "invalid",
			Msg: "X-Operator header names someone other than the operator whose token this is (alice)"},
		{Name: "replay with SQL in X-Operator", Method: "POST", Path: replay, Body: reason, Header: admin("X-Operator", "alice'); DELETE FROM notify.audit;--"), Status: 400, Code: "invalid", Msg: "names someone other"},
		{Name: "replay without a reason", Method: "POST", Path: replay, Body: `{}`, Header: admin(), Status: 400, Code: "invalid", Msg: "reason is required"},
		{Name: "replay as text/plain", Method: "POST", Path: replay, Body: reason, Header: admin("Content-Type", "text/plain"), Status: 415, Code: "unsupported_media_type", Msg: "application/json"},
		// Refused by httpx.CheckReason before the action runs; a NUL used to reach Postgres in
		// the audit insert, after the skip (or the replay's SMS) in the same transaction: a 500.
		{Name: "skip with NUL in the reason", Method: "POST", Path: skip, Body: `{"seq":1,"reason":"lost\u0000 in failover"}`, Header: admin(), Status: 400, Code: "invalid", Msg: "U+0000"},
		{Name: "replay with a lone surrogate in the reason", Method: "POST", Path: replay, Body: `{"reason":"outage \ud800 over"}`, Header: admin(), Status: 400, Code: "invalid", Msg: "U+FFFD"},
		{Name: "replay with an unknown field", Method: "POST", Path: replay, Body: `{"reason":"x","force":true}`, Header: admin(), Status: 400, Code: "invalid", Msg: "unknown field"},
		{Name: "skip with a body of 1 MiB", Method: "POST", Path: skip, Body: `{"seq":1,"reason":"` + strings.Repeat("r", 1<<20) + `"}`, Header: admin(), Status: 413, Code: "too_large", Msg: "too large"},
		{Name: "skip a negative seq", Method: "POST", Path: skip, Body: `{"seq":-1,"reason":"x"}`, Header: admin(), Status: 400, Code: "invalid", Msg: "seq must be the positive seq"},
		{Name: "skip a fractional seq", Method: "POST", Path: skip, Body: `{"seq":1.5,"reason":"x"}`, Header: admin(), Status: 400, Code: "invalid", Msg: `"seq"`},
		{Name: "skip with SQL in the user id", Method: "POST", Path: "/v1/gate/1;DROP%20TABLE%20notify.progress/skip", Body: skipBody, Header: admin(), Status: 400, Code: "invalid", Msg: "user id must be a positive integer"},
		{Name: "replay with SQL in the seq", Method: "POST", Path: fmt.Sprintf("/v1/dead-letters/%d/1%%20OR%%201=1/replay", user), Body: reason, Header: admin(), Status: 400, Code: "invalid", Msg: "seq must be a positive integer"},
		{Name: "replay with a reason ending in an ideographic space", Method: "POST", Path: replay, Body: `{"reason":"恢复了\u3000"}`, Header: admin(), Status: 400, Code: "invalid", Msg: "must not start or end with spaces"},
	}...)
}

// needsAttention makes a saga in needs_attention, where a failed compensation leaves one:
// a declined deposit (terminal, so no runner touches it again), moved there by hand. An
// operator action on it would go through, so the corpus's bad operator requests are refused
// for what is wrong with them, not for the saga's state.
func (s *stack) needsAttention(a api, user int64) int64 {
	s.t.Helper()
	out := a.must(200, "POST", "/v1/users/"+strconv.FormatInt(user, 10)+"/deposits?wait=true", "", map[string]any{"amount": 500, "source": providersim.DeclinedSource})
	require.Equal(s.t, "failed", out["state"], "declined deposit %v", out)
	id := int64(out["id"].(float64))
	tag, err := s.pool.Exec(context.Background(), `UPDATE sagas SET state = 'needs_attention', phase = 'compensate',
		error_code = 'compensation_failed', error_message = 'refund failed (set by the test)' WHERE id = $1 AND state = 'failed'`, id)
	require.NoError(s.t, err)
	require.EqualValues(s.t, 1, tag.RowsAffected())
	return id
}

// fillToMaxBalance takes user's wallet to exactly wallet.MaxBalance: a seeded deposit just
// below it, written in SQL as a completed deposit saga would have left it (saga, operation,
// ledger row, balance and its event, so balance = sum(ledger) and seqs stay gap-free), then
// real deposits of at most wallet.MaxAmount through the API, waited for, until the wallet is
// full. Any further credit would overflow int64.
func (s *stack) fillToMaxBalance(a api, user int64) {
	t := s.t
	t.Helper()
	const realDeposits = 3
	seed := wallet.MaxBalance - realDeposits*wallet.MaxAmount - 777
	ctx := context.Background()
	err := pg.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var sagaID int64
		if err := tx.QueryRow(ctx, `INSERT INTO sagas (kind, state, input) VALUES ('deposit', 'completed',
			jsonb_build_object('user_id', $1::bigint, 'amount', $2::bigint, 'currency', 'CNY', 'source', 'seed'))
			RETURNING id`, user, int64(seed)).Scan(&sagaID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
WITH o AS (
    INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency, source) VALUES ($1, 'deposit', $2, $3, 'CNY', 'seed')
), l AS (
    INSERT INTO ledger_entries (user_id, saga_id, step, amount, balance_after) VALUES ($2, $1, 'credit', $3, $3)
), w AS (
    UPDATE wallets SET balance = $3, event_seq = 1, updated_at = now() WHERE user_id = $2 AND balance = 0 AND event_seq = 0
)
INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
SELECT $2, 1, 'deposit', $3, 'CNY', $3, $1, phone, locale FROM users WHERE id = $2`, sagaID, user, int64(seed))
		return err
	})
	require.NoError(t, err)
	for i, left := 1, wallet.MaxBalance-seed; left > 0; i++ {
		amount := min(left, wallet.MaxAmount)
		a.depositWait(user, int64(amount), fmt.Sprintf("fill-%d-%d", user, i))
		left -= amount
	}
	out := a.must(200, "GET", "/v1/users/"+strconv.FormatInt(user, 10)+"/wallet", "", nil)
	require.Equal(t, float64(wallet.MaxBalance), out["balance"], "wallet %v", out)
}

// settle waits until nothing moves by itself any more: every saga terminal with its lease
// released, every event published, every SMS finished. Only then can a fingerprint taken
// before the corpus be compared with one taken after.
func (s *stack) settle(timeout time.Duration) {
	s.t.Helper()
	wait.Until(s.t, timeout, "sagas, relay and notifier to settle", func() bool {
		return s.count(`SELECT (SELECT count(*) FROM sagas WHERE state IN ('running', 'compensating') OR lease_owner IS NOT NULL)
			+ (SELECT count(*) FROM wallet_events WHERE published_at IS NULL)`) == 0 && s.smsDone()
	})
}

// TestUnicodeAndInjectionLookingInputIsStoredVerbatim is the bad-input corpus's positive
// control: text that is unusual but valid — CJK, Polish, emoji, names and references that
// look like SQL, a name of exactly the maximum length — is accepted, stored and returned
// byte for byte, and the tables it names are still there.
func TestUnicodeAndInjectionLookingInputIsStoredVerbatim(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.start("walletsvc", nil)
	a := api{t: t, base: func() string { return w.url }}
	ctx := context.Background()

	names := []string{"李雷 Łukasz 🙂", "Robert'); DROP TABLE users;--", `O'Brien "Bobby" <b>&amp;</b>`, strings.Repeat("🙂", 200)}
	var first int64
	for i, name := range names {
		out := a.must(201, "POST", "/v1/users", "", map[string]any{"name": name, "phone": okPhone(i), "locale": "en"})
		require.Equal(t, name, out["name"], "returned verbatim")
		id := int64(out["id"].(float64))
		var stored string
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT name FROM users WHERE id = $1`, id).Scan(&stored))
		require.Equal(t, name, stored, "stored verbatim")
		if first == 0 {
			first = id
		}
	}
	require.Equal(t, len(names), s.count(`SELECT count(*) FROM users`), "the users table is intact")

	const merchant, reference, key = "Café «Zürich» 咖啡 🙂", "x'); DROP TABLE sagas;--", "Robert');DROP-TABLE-sagas;--"
	out := a.must(202, "POST", "/v1/users/"+strconv.FormatInt(first, 10)+"/purchases", key,
		map[string]any{"amount": 100, "merchant": merchant, "reference": reference})
	sagaPath := "/v1/sagas/" + strconv.FormatInt(int64(out["id"].(float64)), 10)
	out = a.must(200, "GET", sagaPath, "", nil)
	require.Equal(t, merchant, out["merchant"])
	require.Equal(t, reference, out["reference"])
	again := a.must(202, "POST", "/v1/users/"+strconv.FormatInt(first, 10)+"/purchases", key,
		map[string]any{"amount": 100, "merchant": merchant, "reference": reference})
	require.Equal(t, out["id"], again["id"], "the injection-looking key replays its saga")
	require.Equal(t, 1, s.count(`SELECT count(*) FROM sagas`), "the sagas table is intact")
}
