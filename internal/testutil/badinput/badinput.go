// Package badinput is the corpus of bad requests to the wallet API, for tests: each case
// must get a 4xx with a JSON error body ({"error":{"code","message"}}) and change nothing.
// httpapi's tests replay it in-process and e2e replays it against the walletsvc binary, so
// one list serves both; e2e adds the cases that need a live stack (balances near the int64
// limit, a used Idempotency-Key, the notifier).
//
// Fingerprint is what "change nothing" means: every table of both services.
package badinput

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/freetext"
)

// Case is one bad request and the answer it must get.
type Case struct {
	Name         string
	Method, Path string
	Body         string // sent as is (it may hold invalid UTF-8); "" sends none
	// Header holds name, value pairs set after the defaults (Content-Type: application/json
	// and the service token); a value "" sends the header empty, which counts as absent.
	Header []string
	Status int
	Code   string // the error code
	Msg    string // a fragment of the error message
}

// Fixture is what the corpus needs from the world it runs against.
type Fixture struct {
	// User and Other are two users with wallets.
	User, Other int64
	// Operator is the name of one of walletsvc's operators (OPERATOR_TOKENS), and
	// OperatorToken that operator's token.
	Operator, OperatorToken string
	// NeedsAttention is a saga in needs_attention: an operator action on it with a valid
	// token and reason would go through, so the bad part of the request is the only thing in
	// its way.
	NeedsAttention int64
}

// MiB is a request body of a little over 1 MiB: a user whose name is 1 MiB long.
var MiB = `{"name":"` + strings.Repeat("a", 1<<20) + `","phone":"+8613800138000"}`

// Cases returns the corpus for f, grouped by what is wrong.
func Cases(f Fixture) []Case {
	var all []Case
	for _, group := range [][]Case{
		bodyCases(f), amountCases(f), idCases(f), queryCases(f), textCases(f), phoneCases(), keyCases(f), operatorCases(f),
	} {
		all = append(all, group...)
	}
	return all
}

// bodyCases: content type, JSON syntax, shape, unknown fields, size.
func bodyCases(f Fixture) []Case {
	dep := fmt.Sprintf("/v1/users/%d/deposits", f.User)
	return []Case{
		{Name: "unknown field", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":"+8613800138000","admin":true}`, Status: 400, Code: "invalid", Msg: "unknown field"},
		{Name: "deposit unknown field", Method: "POST", Path: dep, Body: `{"amount":100,"currency":"USD"}`, Status: 400, Code: "invalid", Msg: "unknown field"},
		{Name: "purchase unknown field", Method: "POST", Path: fmt.Sprintf("/v1/users/%d/purchases", f.User), Body: `{"amount":1,"merchant":"m","reference":"r","discount":100}`, Status: 400, Code: "invalid", Msg: `unknown field "discount"`},
		{Name: "withdrawal unknown field", Method: "POST", Path: fmt.Sprintf("/v1/users/%d/withdrawals", f.User), Body: `{"amount":1,"destination":"bank","iban":"DE00"}`, Status: 400, Code: "invalid", Msg: `unknown field "iban"`},
		{Name: "transfer unknown field", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":%d,"to":%d,"amount":1,"fee":0}`, f.User, f.Other), Status: 400, Code: "invalid", Msg: `unknown field "fee"`},
		{Name: "two objects", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":"+8613800138000"}{}`, Status: 400, Code: "invalid", Msg: "single JSON object"},
		{Name: "empty body", Method: "POST", Path: "/v1/users", Status: 400, Code: "invalid", Msg: "empty"},
		{Name: "truncated JSON", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":`, Status: 400, Code: "invalid", Msg: "invalid JSON"},
		{Name: "single-quoted JSON", Method: "POST", Path: "/v1/users", Body: `{'name':'a','phone':'+8613800138000'}`, Status: 400, Code: "invalid", Msg: "invalid JSON at byte"},
		{Name: "trailing comma", Method: "POST", Path: dep, Body: `{"amount":100,}`, Status: 400, Code: "invalid", Msg: "invalid JSON"},
		// A key given twice: encoding/json keeps the last, another parser on the path may keep
		// the first, so the request means two things. httpx refuses it.
		{Name: "amount given twice", Method: "POST", Path: dep, Body: `{"amount":-1,"amount":100}`, Status: 400, Code: "invalid", Msg: `field "amount" appears twice`},
		{Name: "payee given twice", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":%d,"to":999999,"amount":1,"to":%d}`, f.User, f.Other), Status: 400, Code: "invalid", Msg: `field "to" appears twice`},
		{Name: "JSON array body", Method: "POST", Path: "/v1/users", Body: `[{"name":"a","phone":"+8613800138000"}]`, Status: 400, Code: "invalid", Msg: "must be a JSON object"},
		{Name: "JSON string body", Method: "POST", Path: dep, Body: `"amount=100"`, Status: 400, Code: "invalid", Msg: "must be a JSON object"},
		{Name: "not json", Method: "POST", Path: "/v1/users", Body: `name=a`, Header: []string{"Content-Type", "application/x-www-form-urlencoded"}, Status: 415, Code: "unsupported_media_type", Msg: "application/json"},
		{Name: "text/plain", Method: "POST", Path: dep, Body: `{"amount":100}`, Header: []string{"Content-Type", "text/plain"}, Status: 415, Code: "unsupported_media_type", Msg: "application/json"},
		{Name: "XML", Method: "POST", Path: "/v1/transfers", Body: `<transfer from="1" to="2" amount="1"/>`, Header: []string{"Content-Type", "application/xml"}, Status: 415, Code: "unsupported_media_type", Msg: "application/json"},
		{Name: "no content type", Method: "POST", Path: dep, Body: `{"amount":100}`, Header: []string{"Content-Type", ""}, Status: 415, Code: "unsupported_media_type", Msg: "application/json"},
		{Name: "body over 64K", Method: "POST", Path: "/v1/users", Body: `{"name":"` + strings.Repeat("a", 70<<10) + `","phone":"+8613800138000"}`, Status: 413, Code: "too_large", Msg: "too large"},
		{Name: "body of 1 MiB", Method: "POST", Path: "/v1/users", Body: MiB, Status: 413, Code: "too_large", Msg: "too large"},
		{Name: "deposit body of 1 MiB", Method: "POST", Path: dep, Body: `{"amount":100,"source":"` + strings.Repeat("s", 1<<20) + `"}`, Status: 413, Code: "too_large", Msg: "too large"},
		{Name: "no such route", Method: "GET", Path: "/v1/nothing", Status: 404, Code: "not_found", Msg: "no such route"},
		{Name: "method not allowed", Method: "DELETE", Path: fmt.Sprintf("/v1/users/%d/wallet", f.User), Status: 405, Code: "method_not_allowed", Msg: "Allow header"},
		{Name: "TRACE on a known path", Method: "TRACE", Path: "/v1/transfers", Status: 405, Code: "method_not_allowed", Msg: "method not allowed"},
	}
}

// amountCases: negative, zero, fractional, huge and non-numeric amounts.
func amountCases(f Fixture) []Case {
	dep := fmt.Sprintf("/v1/users/%d/deposits", f.User)
	pur := fmt.Sprintf("/v1/users/%d/purchases", f.User)
	wd := fmt.Sprintf("/v1/users/%d/withdrawals", f.User)
	tr := func(amount string) string {
		return fmt.Sprintf(`{"from":%d,"to":%d,"amount":%s}`, f.User, f.Other, amount)
	}
	return []Case{
		{Name: "amount fraction", Method: "POST", Path: dep, Body: `{"amount":100.5}`, Status: 400, Code: "invalid", Msg: "integer number of minor units"},
		{Name: "amount with .0", Method: "POST", Path: dep, Body: `{"amount":100.0}`, Status: 400, Code: "invalid", Msg: "integer number of minor units"},
		{Name: "amount exponent", Method: "POST", Path: dep, Body: `{"amount":1e3}`, Status: 400, Code: "invalid", Msg: "exponent"},
		{Name: "amount string", Method: "POST", Path: dep, Body: `{"amount":"100"}`, Status: 400, Code: "invalid", Msg: "not a string"},
		{Name: "amount negative", Method: "POST", Path: dep, Body: `{"amount":-5}`, Status: 400, Code: "invalid", Msg: "positive"},
		{Name: "amount minus zero", Method: "POST", Path: dep, Body: `{"amount":-0}`, Status: 400, Code: "invalid", Msg: "must be positive"},
		{Name: "amount zero", Method: "POST", Path: dep, Body: `{"amount":0}`, Status: 400, Code: "invalid", Msg: "positive"},
		{Name: "amount above limit", Method: "POST", Path: dep, Body: `{"amount":10000000001}`, Status: 400, Code: "invalid", Msg: "at most 10000000000"},
		{Name: "amount int64 max", Method: "POST", Path: dep, Body: `{"amount":9223372036854775807}`, Status: 400, Code: "invalid", Msg: "at most 10000000000"},
		{Name: "amount beyond int64", Method: "POST", Path: dep, Body: `{"amount":99999999999999999999}`, Status: 400, Code: "invalid", Msg: "at most"},
		{Name: "amount of 400 digits", Method: "POST", Path: dep, Body: `{"amount":` + strings.Repeat("9", 400) + `}`, Status: 400, Code: "invalid", Msg: "at most 10000000000"},
		{Name: "amount missing", Method: "POST", Path: dep, Body: `{}`, Status: 400, Code: "invalid", Msg: "amount is required"},
		{Name: "amount null", Method: "POST", Path: dep, Body: `{"amount":null}`, Status: 400, Code: "invalid", Msg: "amount is required"},
		{Name: "amount bool", Method: "POST", Path: dep, Body: `{"amount":true}`, Status: 400, Code: "invalid", Msg: "JSON integer"},
		{Name: "amount object", Method: "POST", Path: dep, Body: `{"amount":{"value":100}}`, Status: 400, Code: "invalid", Msg: "JSON integer"},
		{Name: "amount hex", Method: "POST", Path: dep, Body: `{"amount":0x10}`, Status: 400, Code: "invalid", Msg: "invalid JSON"},
		{Name: "amount NaN", Method: "POST", Path: dep, Body: `{"amount":NaN}`, Status: 400, Code: "invalid", Msg: "invalid JSON"},
		{Name: "withdrawal amount negative", Method: "POST", Path: wd, Body: `{"amount":-100,"destination":"bank"}`, Status: 400, Code: "invalid", Msg: "must be positive"},
		{Name: "withdrawal amount string", Method: "POST", Path: wd, Body: `{"amount":"100","destination":"bank"}`, Status: 400, Code: "invalid", Msg: "not a string"},
		{Name: "withdrawal amount above limit", Method: "POST", Path: wd, Body: `{"amount":10000000001,"destination":"bank"}`, Status: 400, Code: "invalid", Msg: "at most 10000000000"},
		{Name: "purchase amount negative", Method: "POST", Path: pur, Body: `{"amount":-100,"merchant":"m","reference":"r"}`, Status: 400, Code: "invalid", Msg: "must be positive"},
		{Name: "transfer amount fraction", Method: "POST", Path: "/v1/transfers", Body: tr("0.5"), Status: 400, Code: "invalid", Msg: "minor units"},
		{Name: "transfer amount zero", Method: "POST", Path: "/v1/transfers", Body: tr("0"), Status: 400, Code: "invalid", Msg: "positive"},
		{Name: "transfer amount string", Method: "POST", Path: "/v1/transfers", Body: tr(`"1"`), Status: 400, Code: "invalid", Msg: "not a string"},
	}
}

// idCases: unknown and malformed ids in paths and bodies, including injection strings.
func idCases(f Fixture) []Case {
	return []Case{
		{Name: "wallet id not a number", Method: "GET", Path: "/v1/users/abc/wallet", Status: 400, Code: "invalid", Msg: "positive 64-bit integer"},
		{Name: "wallet id zero", Method: "GET", Path: "/v1/users/0/wallet", Status: 400, Code: "invalid", Msg: "positive"},
		{Name: "wallet id negative", Method: "GET", Path: "/v1/users/-3/wallet", Status: 400, Code: "invalid", Msg: "positive"},
		{Name: "wallet id with plus", Method: "GET", Path: "/v1/users/+1/wallet", Status: 400, Code: "invalid", Msg: "positive 64-bit integer"},
		{Name: "wallet id fraction", Method: "GET", Path: "/v1/users/1.5/wallet", Status: 400, Code: "invalid", Msg: "positive 64-bit integer"},
		{Name: "wallet id beyond int64", Method: "GET", Path: "/v1/users/99999999999999999999/wallet", Status: 400, Code: "invalid", Msg: "64-bit"},
		{Name: "wallet id with SQL", Method: "GET", Path: "/v1/users/1;DROP%20TABLE%20users/wallet", Status: 400, Code: "invalid", Msg: "positive 64-bit integer"},
		{Name: "events id with quote", Method: "GET", Path: "/v1/users/1%27%20OR%20%271%27=%271/events", Status: 400, Code: "invalid", Msg: "positive 64-bit integer"},
		{Name: "deposit id with NUL", Method: "POST", Path: "/v1/users/1%00/deposits", Body: `{"amount":1}`, Status: 400, Code: "invalid", Msg: "positive 64-bit integer"},
		{Name: "wallet unknown user", Method: "GET", Path: "/v1/users/999999/wallet", Status: 404, Code: "not_found", Msg: "user 999999 not found"},
		{Name: "events unknown user", Method: "GET", Path: "/v1/users/999999/events", Status: 404, Code: "not_found", Msg: "not found"},
		{Name: "deposit unknown user", Method: "POST", Path: "/v1/users/999999/deposits", Body: `{"amount":100}`, Status: 404, Code: "not_found", Msg: "user 999999"},
		{Name: "purchase unknown user", Method: "POST", Path: "/v1/users/999999/purchases", Body: `{"amount":100,"merchant":"m","reference":"r"}`, Status: 404, Code: "not_found", Msg: "user 999999"},
		{Name: "withdrawal unknown user", Method: "POST", Path: "/v1/users/999999/withdrawals", Body: `{"amount":100,"destination":"bank"}`, Status: 404, Code: "not_found", Msg: "user 999999"},
		{Name: "withdrawal id with SQL", Method: "POST", Path: "/v1/users/1;DROP%20TABLE%20wallets/withdrawals", Body: `{"amount":100,"destination":"bank"}`, Status: 400, Code: "invalid", Msg: "positive 64-bit integer"},
		{Name: "saga id not a number", Method: "GET", Path: "/v1/sagas/x", Status: 400, Code: "invalid", Msg: "saga id"},
		{Name: "saga id with SQL", Method: "GET", Path: "/v1/sagas/1%20OR%201=1", Status: 400, Code: "invalid", Msg: "saga id"},
		{Name: "saga unknown", Method: "GET", Path: "/v1/sagas/424242", Status: 404, Code: "not_found", Msg: "saga 424242"},
		{Name: "transfer to oneself", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":%d,"to":%d,"amount":1}`, f.User, f.User), Status: 422, Code: "unprocessable", Msg: "oneself"},
		{Name: "transfer from string", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":"%d","to":%d,"amount":1}`, f.User, f.Other), Status: 400, Code: "invalid", Msg: "from must be a positive integer"},
		{Name: "transfer from zero", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":0,"to":%d,"amount":1}`, f.Other), Status: 400, Code: "invalid", Msg: "from must be a positive integer"},
		{Name: "transfer from negative", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":-%d,"to":%d,"amount":1}`, f.User, f.Other), Status: 400, Code: "invalid", Msg: "from must be a positive integer"},
		{Name: "transfer to fraction", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":%d,"to":%d.5,"amount":1}`, f.User, f.Other), Status: 400, Code: "invalid", Msg: "to must be a positive integer"},
		{Name: "transfer to beyond int64", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":%d,"to":9223372036854775808,"amount":1}`, f.User), Status: 400, Code: "invalid", Msg: "to must be a positive integer"},
		{Name: "transfer to missing", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":%d,"amount":1}`, f.User), Status: 400, Code: "invalid", Msg: "to is required"},
		{Name: "transfer to unknown", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":%d,"to":999999,"amount":1}`, f.User), Status: 404, Code: "not_found", Msg: "user 999999"},
		{Name: "transfer from unknown", Method: "POST", Path: "/v1/transfers", Body: fmt.Sprintf(`{"from":999999,"to":%d,"amount":1}`, f.Other), Status: 404, Code: "not_found", Msg: "user 999999"},
	}
}

// queryCases: query parameters out of range or carrying injection strings.
func queryCases(f Fixture) []Case {
	events := fmt.Sprintf("/v1/users/%d/events", f.User)
	return []Case{
		{Name: "deposit bad wait", Method: "POST", Path: fmt.Sprintf("/v1/users/%d/deposits?wait=maybe", f.User), Body: `{"amount":100}`, Status: 400, Code: "invalid", Msg: "wait"},
		{Name: "deposit wait spelled 1", Method: "POST", Path: fmt.Sprintf("/v1/users/%d/deposits?wait=1", f.User), Body: `{"amount":100}`, Status: 400, Code: "invalid", Msg: "wait must be true or false"},
		{Name: "deposit wait empty", Method: "POST", Path: fmt.Sprintf("/v1/users/%d/deposits?wait=", f.User), Body: `{"amount":100}`, Status: 400, Code: "invalid", Msg: "wait must be true or false"},
		{Name: "withdrawal bad wait", Method: "POST", Path: fmt.Sprintf("/v1/users/%d/withdrawals?wait=yes", f.User), Body: `{"amount":100,"destination":"bank"}`, Status: 400, Code: "invalid", Msg: "wait must be true or false"},
		{Name: "sagas state empty", Method: "GET", Path: "/v1/sagas?state=", Status: 400, Code: "invalid", Msg: "state must not be empty"},
		{Name: "sagas limit empty", Method: "GET", Path: "/v1/sagas?limit=", Status: 400, Code: "invalid", Msg: "limit"},
		{Name: "sagas bad state", Method: "GET", Path: "/v1/sagas?state=done", Status: 400, Code: "invalid", Msg: "state must be one of"},
		{Name: "sagas state injection", Method: "GET", Path: "/v1/sagas?state=%27%20OR%201=1--", Status: 400, Code: "invalid", Msg: "state must be one of"},
		{Name: "sagas limit zero", Method: "GET", Path: "/v1/sagas?limit=0", Status: 400, Code: "invalid", Msg: "limit"},
		{Name: "sagas limit too big", Method: "GET", Path: "/v1/sagas?limit=101", Status: 400, Code: "invalid", Msg: "limit"},
		{Name: "sagas bad user", Method: "GET", Path: "/v1/sagas?user_id=-1", Status: 400, Code: "invalid", Msg: "user_id"},
		{Name: "sagas user injection", Method: "GET", Path: "/v1/sagas?user_id=1%20OR%201=1", Status: 400, Code: "invalid", Msg: "user_id"},
		{Name: "sagas unknown user", Method: "GET", Path: "/v1/sagas?user_id=999999", Status: 404, Code: "not_found", Msg: "user 999999"},
		{Name: "sagas bad cursor", Method: "GET", Path: "/v1/sagas?cursor=abc", Status: 400, Code: "invalid", Msg: "cursor"},
		{Name: "sagas cursor injection", Method: "GET", Path: "/v1/sagas?cursor=1%3BDROP%20TABLE%20sagas", Status: 400, Code: "invalid", Msg: "cursor"},
		// A ';' separator or a bad escape makes net/url drop the pair: refused, not ignored.
		{Name: "sagas filter after a semicolon", Method: "GET", Path: fmt.Sprintf("/v1/sagas?user_id=%d;DROP%%20TABLE%%20sagas", f.User), Status: 400, Code: "invalid", Msg: "query string is malformed"},
		{Name: "sagas cursor with a bad escape", Method: "GET", Path: "/v1/sagas?cursor=%zz", Status: 400, Code: "invalid", Msg: "query string is malformed"},
		{Name: "events after injection", Method: "GET", Path: events + "?after=0;DELETE%20FROM%20wallet_events", Status: 400, Code: "invalid", Msg: "query string is malformed"},
		{Name: "events after quote injection", Method: "GET", Path: events + "?after=0%27%20OR%20%271%27=%271", Status: 400, Code: "invalid", Msg: "after"},
		{Name: "events limit injection", Method: "GET", Path: events + "?limit=10%27--", Status: 400, Code: "invalid", Msg: "limit"},
		{Name: "events limit too big", Method: "GET", Path: events + "?limit=1001", Status: 400, Code: "invalid", Msg: "between 1 and 1000"},
	}
}

// textCases: names, merchants, references, sources and destinations that are not free text (see
// internal/freetext): NUL and other control characters, unassigned code points, invalid
// UTF-8 (raw bytes, lone surrogates, U+FFFD), white space at either end, over-long values,
// injection strings carrying any of these. Raw invalid bytes are refused
// for the whole body by httpx and, should they get past it, per field by the wallet: the
// expected fragment is what both messages say.
func textCases(f Fixture) []Case {
	user := func(name string) string { return `{"name":"` + name + `","phone":"+8613800138000"}` }
	pur := fmt.Sprintf("/v1/users/%d/purchases", f.User)
	purchase := func(merchant, reference string) string {
		return `{"amount":100,"merchant":"` + merchant + `","reference":"` + reference + `"}`
	}
	dep := fmt.Sprintf("/v1/users/%d/deposits", f.User)
	wd := fmt.Sprintf("/v1/users/%d/withdrawals", f.User)
	return []Case{
		{Name: "name missing", Method: "POST", Path: "/v1/users", Body: `{"phone":"+8613800138000"}`, Status: 400, Code: "invalid", Msg: "name is required"},
		{Name: "name wrong type", Method: "POST", Path: "/v1/users", Body: `{"name":1,"phone":"+8613800138000"}`, Status: 400, Code: "invalid", Msg: `"name"`},
		{Name: "name with NUL", Method: "POST", Path: "/v1/users", Body: user(`Li\u0000Lei`), Status: 400, Code: "invalid", Msg: "name must not contain control characters"},
		{Name: "name with SQL and NUL", Method: "POST", Path: "/v1/users", Body: user(`Robert'); DROP TABLE users;--\u0000`), Status: 400, Code: "invalid", Msg: "U+0000"},
		{Name: "name with ANSI escape", Method: "POST", Path: "/v1/users", Body: user(`\u001b[31mred`), Status: 400, Code: "invalid", Msg: "U+001B"},
		{Name: "name with newline", Method: "POST", Path: "/v1/users", Body: user(`Li\nLei`), Status: 400, Code: "invalid", Msg: "U+000A"},
		{Name: "name with DEL", Method: "POST", Path: "/v1/users", Body: user("Li\x7fLei"), Status: 400, Code: "invalid", Msg: "U+007F"},
		{Name: "name with an unassigned code point", Method: "POST", Path: "/v1/users", Body: user(`Li\u0378Lei`), Status: 400, Code: "invalid", Msg: "U+0378 (unassigned)"},
		{Name: "name with a noncharacter", Method: "POST", Path: "/v1/users", Body: user(`Li\uffffLei`), Status: 400, Code: "invalid", Msg: "U+FFFF (unassigned)"},
		{Name: "name with a C1 control", Method: "POST", Path: "/v1/users", Body: user(`Li\u0085Lei`), Status: 400, Code: "invalid", Msg: "U+0085 (a control character)"},
		{Name: "name ending in an ideographic space", Method: "POST", Path: "/v1/users", Body: user(`李雷\u3000`), Status: 400, Code: "invalid", Msg: "must not start or end with spaces"},
		{Name: "name with invalid UTF-8", Method: "POST", Path: "/v1/users", Body: user("Li\xff\xfeLei"), Status: 400, Code: "invalid", Msg: "UTF-8"},
		{Name: "name with overlong UTF-8 slash", Method: "POST", Path: "/v1/users", Body: user("Li\xc0\xafLei"), Status: 400, Code: "invalid", Msg: "UTF-8"},
		{Name: "name with lone surrogate", Method: "POST", Path: "/v1/users", Body: user(`Li\ud800Lei`), Status: 400, Code: "invalid", Msg: "name must be valid UTF-8"},
		{Name: "name with U+FFFD", Method: "POST", Path: "/v1/users", Body: user(`Li\ufffdLei`), Status: 400, Code: "invalid", Msg: "name must be valid UTF-8"},
		{Name: "name of 201 characters", Method: "POST", Path: "/v1/users", Body: user(strings.Repeat("🙂", 201)), Status: 400, Code: "invalid", Msg: "at most 200 characters, got 201"},
		{Name: "name of spaces", Method: "POST", Path: "/v1/users", Body: user("   "), Status: 400, Code: "invalid", Msg: "must not start or end with spaces"},
		{Name: "locale unknown", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":"+8613800138000","locale":"fr"}`, Status: 400, Code: "invalid", Msg: "locale"},
		{Name: "locale with NUL", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":"+8613800138000","locale":"en\u0000"}`, Status: 400, Code: "invalid", Msg: "locale"},
		{Name: "locale null", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":"+8613800138000","locale":null}`, Status: 400, Code: "invalid", Msg: "locale must be a string"},
		{Name: "source a number", Method: "POST", Path: dep, Body: `{"amount":100,"source":7}`, Status: 400, Code: "invalid", Msg: "source must be a string"},
		{Name: "locale empty", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":"+8613800138000","locale":""}`, Status: 400, Code: "invalid", Msg: "locale must not be empty"},
		{Name: "source empty", Method: "POST", Path: dep, Body: `{"amount":100,"source":""}`, Status: 400, Code: "invalid", Msg: "source must not be empty"},
		{Name: "purchase no merchant", Method: "POST", Path: pur, Body: `{"amount":100,"reference":"r"}`, Status: 400, Code: "invalid", Msg: "merchant is required"},
		{Name: "purchase no reference", Method: "POST", Path: pur, Body: `{"amount":100,"merchant":"m"}`, Status: 400, Code: "invalid", Msg: "reference is required"},
		{Name: "purchase reference too long", Method: "POST", Path: pur, Body: purchase("m", strings.Repeat("r", 101)), Status: 400, Code: "invalid", Msg: "at most 100"},
		{Name: "merchant with NUL", Method: "POST", Path: pur, Body: purchase(`shop\u0000`, "r"), Status: 400, Code: "invalid", Msg: "merchant must not contain control characters"},
		{Name: "merchant with invalid UTF-8", Method: "POST", Path: pur, Body: purchase("caf\xe9", "r"), Status: 400, Code: "invalid", Msg: "UTF-8"},
		{Name: "reference with NUL", Method: "POST", Path: pur, Body: purchase("m", `order-1\u0000`), Status: 400, Code: "invalid", Msg: "reference must not contain control characters"},
		{Name: "reference with SQL and newline", Method: "POST", Path: pur, Body: purchase("m", `x');\nDROP TABLE sagas;--`), Status: 400, Code: "invalid", Msg: "U+000A"},
		{Name: "reference with lone surrogate", Method: "POST", Path: pur, Body: purchase("m", `\udc00order`), Status: 400, Code: "invalid", Msg: "reference must be valid UTF-8"},
		{Name: "reference with an unassigned code point", Method: "POST", Path: pur, Body: purchase("m", `invoice\ud83f\udfff`), Status: 400, Code: "invalid", Msg: "U+1FFFF (unassigned)"},
		{Name: "source with NUL", Method: "POST", Path: dep, Body: `{"amount":100,"source":"card\u0000"}`, Status: 400, Code: "invalid", Msg: "source must not contain control characters"},
		{Name: "withdrawal no destination", Method: "POST", Path: wd, Body: `{"amount":100}`, Status: 400, Code: "invalid", Msg: "destination is required"},
		{Name: "withdrawal destination empty", Method: "POST", Path: wd, Body: `{"amount":100,"destination":""}`, Status: 400, Code: "invalid", Msg: "destination is required"},
		{Name: "withdrawal destination a number", Method: "POST", Path: wd, Body: `{"amount":100,"destination":6222}`, Status: 400, Code: "invalid", Msg: `"destination"`},
		{Name: "destination with NUL", Method: "POST", Path: wd, Body: `{"amount":100,"destination":"bank\u0000"}`, Status: 400, Code: "invalid", Msg: "destination must not contain control characters"},
		{Name: "destination with SQL and newline", Method: "POST", Path: wd, Body: `{"amount":100,"destination":"x');\nDELETE FROM wallets;--"}`, Status: 400, Code: "invalid", Msg: "U+000A"},
		{Name: "destination ending in a space", Method: "POST", Path: wd, Body: `{"amount":100,"destination":"bank "}`, Status: 400, Code: "invalid", Msg: "must not start or end with spaces"},
		{Name: "destination of 101 characters", Method: "POST", Path: wd, Body: `{"amount":100,"destination":"` + strings.Repeat("銀", 101) + `"}`, Status: 400, Code: "invalid", Msg: "at most 100 characters, got 101"},
		{Name: "source with tab", Method: "POST", Path: dep, Body: `{"amount":100,"source":"card\tdeclined"}`, Status: 400, Code: "invalid", Msg: "U+0009"},
	}
}

// phoneCases: numbers that are not E.164, including look-alike digits and injection strings.
func phoneCases() []Case {
	phone := func(p string) string { return `{"name":"a","phone":"` + p + `"}` }
	c := func(name, p string) Case {
		return Case{Name: name, Method: "POST", Path: "/v1/users", Body: phone(p), Status: 400, Code: "invalid", Msg: "E.164"}
	}
	return []Case{
		c("phone without plus", "8613800138000"),
		c("phone too short", "+1234567"),
		c("phone too long", "+1234567890123456"),
		c("phone with letters", "+86138abc0000"),
		c("phone with leading zero", "+0123456789"),
		c("phone with NUL", `+8613800138000\u0000`),
		c("phone with trailing newline", `+8613800138000\n`),
		c("phone with full-width digits", "+８６１３８００１３８０００"),
		c("phone with Arabic-Indic digits", "+٨٦١٣٨٠٠١٣٨٠٠٠"),
		c("phone with SQL", "+86138'; DROP TABLE users;--"),
		{Name: "phone as a number", Method: "POST", Path: "/v1/users", Body: `{"name":"a","phone":8613800138000}`, Status: 400, Code: "invalid", Msg: `"phone"`},
	}
}

// keyCases: malformed Idempotency-Key headers.
func keyCases(f Fixture) []Case {
	dep := fmt.Sprintf("/v1/users/%d/deposits", f.User)
	c := func(name, key string) Case {
		return Case{Name: name, Method: "POST", Path: dep, Body: `{"amount":100}`, Header: []string{"Idempotency-Key", key}, Status: 400, Code: "invalid", Msg: "Idempotency-Key"}
	}
	return []Case{
		c("idempotency key too long", strings.Repeat("k", 256)),
		c("idempotency key with space", "a b"),
		c("idempotency key with tab", "a\tb"),
		c("idempotency key not ASCII", "ключ-🙂"),
		c("idempotency key with SQL", "k'); DELETE FROM idempotency_keys;--"),
		{Name: "withdrawal idempotency key with space", Method: "POST", Path: fmt.Sprintf("/v1/users/%d/withdrawals", f.User), Body: `{"amount":100,"destination":"bank"}`,
			Header: []string{"Idempotency-Key", "w d"}, Status: 400, Code: "invalid", Msg: "Idempotency-Key"},
	}
}

// operatorCases: walletsvc's operator endpoints without an operator's token, with a wrong
// one, and with the right one but an X-Operator header naming someone else, a bad reason or
// a bad saga id.
func operatorCases(f Fixture) []Case {
	saga := fmt.Sprintf("/v1/sagas/%d", f.NeedsAttention)
	admin := func(more ...string) []string {
		return append([]string{"Authorization", "Bearer " + f.OperatorToken}, more...)
	}
	const reason = `{"reason":"refund API is back"}`
	return []Case{
		{Name: "retry without a token", Method: "POST", Path: saga + "/retry", Body: reason, Header: []string{"Authorization", ""}, Status: 401, Code: "unauthorized", Msg: "operator token is required"},
		{Name: "retry with a wrong token", Method: "POST", Path: saga + "/retry", Body: reason, Header: []string{"Authorization", "Bearer wrong-token-wrong-token"}, Status: 403, Code: "forbidden", Msg: "not valid"},
		{Name: "retry with the service token", Method: "POST", Path: saga + "/retry", Body: reason, Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "retry with a Basic token", Method: "POST", Path: saga + "/retry", Body: reason, Header: []string{"Authorization", "Basic " + f.OperatorToken}, Status: 401, Code: "unauthorized", Msg: "Bearer"},
		{Name: "resolve without a token", Method: "POST", Path: saga + "/resolve", Body: reason, Header: []string{"Authorization", ""}, Status: 401, Code: "unauthorized", Msg: "operator token is required"},
		{Name: "resolve with a wrong token", Method: "POST", Path: saga + "/resolve", Body: reason, Header: []string{"Authorization", "Bearer " + f.OperatorToken + "x"}, Status: 403, Code: "forbidden", Msg: "not valid"},
		{Name: "audit without a token", Method: "GET", Path: saga + "/audit", Header: []string{"Authorization", ""}, Status: 401, Code: "unauthorized", Msg: "operator token is required"},
		{Name: "audit with a wrong token", Method: "GET", Path: saga + "/audit", Header: []string{"Authorization", "Bearer wrong-token-wrong-token"}, Status: 403, Code: "forbidden", Msg: "not valid"},
		{Name: "retry with X-Operator naming another operator", Method: "POST", Path: saga + "/retry", Body: reason, Header: admin("X-Operator", f.Operator+"-not"), Status: 400, Code: "invalid",
			Msg: "X-Operator header names someone other than the operator whose token this is (" + f.Operator + ")"},
		{Name: "resolve with a wrong token and X-Operator naming the operator", Method: "POST", Path: saga + "/resolve", Body: reason,
			Header: []string{"Authorization", "Bearer wrong-token-wrong-token", "X-Operator", f.Operator}, Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "retry with SQL in X-Operator", Method: "POST", Path: saga + "/retry", Body: reason, Header: admin("X-Operator", "alice'; DROP TABLE audit;--"), Status: 400, Code: "invalid", Msg: "names someone other"},
		{Name: "audit with X-Operator naming another operator", Method: "GET", Path: saga + "/audit", Header: admin("X-Operator", f.Operator+"-not"), Status: 400, Code: "invalid", Msg: "leave the header out"},
		{Name: "retry without a reason", Method: "POST", Path: saga + "/retry", Body: `{}`, Header: admin(), Status: 400, Code: "invalid", Msg: "reason is required"},
		{Name: "retry with NUL in the reason", Method: "POST", Path: saga + "/retry", Body: `{"reason":"refund\u0000 API is back"}`, Header: admin(), Status: 400, Code: "invalid", Msg: "U+0000"},
		{Name: "resolve with invalid UTF-8 in the reason", Method: "POST", Path: saga + "/resolve", Body: "{\"reason\":\"refunded by hand \xff\"}", Header: admin(), Status: 400, Code: "invalid", Msg: "UTF-8"},
		{Name: "resolve with a lone surrogate in the reason", Method: "POST", Path: saga + "/resolve", Body: `{"reason":"refunded \udfff by hand"}`, Header: admin(), Status: 400, Code: "invalid", Msg: "U+FFFD"},
		{Name: "resolve with a reason over 500 bytes", Method: "POST", Path: saga + "/resolve", Body: `{"reason":"` + strings.Repeat("r", 501) + `"}`, Header: admin(), Status: 400, Code: "invalid", Msg: "at most 500"},
		{Name: "retry with an unknown field", Method: "POST", Path: saga + "/retry", Body: `{"reason":"x","force":true}`, Header: admin(), Status: 400, Code: "invalid", Msg: "unknown field"},
		{Name: "retry with SQL in the saga id", Method: "POST", Path: "/v1/sagas/1;DROP%20TABLE%20audit/retry", Body: reason, Header: admin(), Status: 400, Code: "invalid", Msg: "saga id"},
		{Name: "resolve an unknown saga", Method: "POST", Path: "/v1/sagas/424242/resolve", Body: reason, Header: admin(), Status: 404, Code: "not_found", Msg: "saga 424242"},
		{Name: "operator list without a token", Method: "GET", Path: "/v1/operator/sagas", Header: []string{"Authorization", ""}, Status: 401, Code: "unauthorized", Msg: "operator token is required"},
		{Name: "operator list with the service token", Method: "GET", Path: "/v1/operator/sagas", Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "operator list limit too big", Method: "GET", Path: "/v1/operator/sagas?limit=101", Header: admin(), Status: 400, Code: "invalid", Msg: "limit"},
		{Name: "operator list bad cursor", Method: "GET", Path: "/v1/operator/sagas?cursor=abc", Header: admin(), Status: 400, Code: "invalid", Msg: "cursor"},
		{Name: "operator list bad state", Method: "GET", Path: "/v1/operator/sagas?state=done", Header: admin(), Status: 400, Code: "invalid", Msg: "state must be one of"},
		{Name: "operator saga without a token", Method: "GET", Path: "/v1/operator/sagas/" + fmt.Sprint(f.NeedsAttention), Header: []string{"Authorization", ""}, Status: 401, Code: "unauthorized", Msg: "operator token is required"},
		{Name: "operator saga with the service token", Method: "GET", Path: "/v1/operator/sagas/" + fmt.Sprint(f.NeedsAttention), Status: 403, Code: "forbidden", Msg: "operator token is not valid"},
		{Name: "operator saga with SQL in the id", Method: "GET", Path: "/v1/operator/sagas/1;DROP%20TABLE%20sagas", Header: admin(), Status: 400, Code: "invalid", Msg: "saga id"},
		{Name: "operator saga unknown", Method: "GET", Path: "/v1/operator/sagas/424242", Header: admin(), Status: 404, Code: "not_found", Msg: "saga 424242"},
		{Name: "console with a malformed query", Method: "GET", Path: "/?q=%zz", Status: 400, Code: "invalid", Msg: "query string is malformed"},
		{Name: "console asset that is not one", Method: "GET", Path: "/assets/index.html", Status: 404, Code: "not_found", Msg: "no asset"},
	}
}

// Run sends each case to the API at base as a subtest: Content-Type: application/json and,
// when serviceToken is not empty, Authorization: Bearer serviceToken, then the case's own
// headers. Each must answer its status with a JSON error body carrying its code and message
// fragment.
func Run(t *testing.T, client *http.Client, base, serviceToken string, cases []Case) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range cases {
		require.False(t, seen[c.Name], "two cases named %q", c.Name)
		seen[c.Name] = true
		require.True(t, c.Status >= 400 && c.Status < 500, "case %q expects %d: the corpus is of client errors", c.Name, c.Status)
		t.Run(c.Name, func(t *testing.T) {
			status, raw := send(t, client, base, serviceToken, c)
			var body struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal(raw, &body), "a JSON error body, got %d %q", status, freetext.Clip(string(raw), 300))
			require.Equal(t, c.Status, status, "%s", freetext.Clip(string(raw), 300))
			require.Equal(t, c.Code, body.Error.Code, "%s", freetext.Clip(string(raw), 300))
			require.Contains(t, body.Error.Message, c.Msg)
		})
	}
}

func send(t *testing.T, client *http.Client, base, serviceToken string, c Case) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if c.Body != "" {
		rd = strings.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(t.Context(), c.Method, base+c.Path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if serviceToken != "" {
		req.Header.Set("Authorization", "Bearer "+serviceToken)
	}
	for i := 0; i+1 < len(c.Header); i += 2 {
		req.Header.Set(c.Header[i], c.Header[i+1])
	}
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, raw
}

// Fingerprint returns, for every table in the schemas public, notify and providersim (the
// provider simulator's, when it keeps its store in the same database; goose's version
// table aside), its row count and an md5 of all its rows in a fixed order, plus the sums of
// the wallets' balances and event seqs, spelled out so that a diff is readable. Tables are
// listed from the catalogue, so one that a later migration adds is covered without anyone
// remembering to add it here.
func Fingerprint(t testing.TB, ctx context.Context, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema IN ('public', 'notify', 'providersim') AND table_type = 'BASE TABLE' AND table_name <> 'goose_db_version'
		ORDER BY 1, 2`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgx.Identifier, error) {
		var schema, name string
		return pgx.Identifier{schema, name}, r.Scan(&schema, &name)
	})
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	out := map[string]string{}
	for _, tb := range tables {
		var n int64
		var sum string
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), COALESCE(md5(string_agg(r::text, E'\n' ORDER BY r::text)), '')
			FROM `+tb.Sanitize()+` r`).Scan(&n, &sum))
		out[strings.Join(tb, ".")] = fmt.Sprintf("%d rows, md5 %s", n, sum)
	}
	var balances, seqs string
	require.NoError(t, pool.QueryRow(ctx, `SELECT COALESCE(sum(balance), 0)::text, COALESCE(sum(event_seq), 0)::text FROM wallets`).Scan(&balances, &seqs))
	out["wallets: sum(balance)"], out["wallets: sum(event_seq)"] = balances, seqs
	return out
}
