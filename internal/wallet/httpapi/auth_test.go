package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// The authorization decision, as a table: who (the service token for everyone, the service
// token that only creates users, user 7's token, a token naming nobody) against what (the
// path's user, a transfer's payer, a saga's parties, a saga list's filter, creating a user).
func TestAuthorize(t *testing.T) {
	t.Parallel()
	var (
		service     = caller{service: true, forAll: true}
		serviceOnly = caller{service: true}
		user7       = caller{user: 7, claim: "7"}
		nobody      = caller{claim: "auth0|abc"}
	)
	cases := []struct {
		name string
		who  caller
		what access
		// want is "" when allowed, else a part of the 403's message.
		want string
	}{
		{"service creates a user", service, access{kind: mayCreateUser}, ""},
		{"service acts for anyone", service, access{kind: mayActFor, user: 8}, ""},
		{"service pays from anyone", service, access{kind: mayPay, user: 8}, ""},
		{"service reads any saga", service, access{kind: mayReadSaga, user: 8, counterparty: 9, saga: 1}, ""},
		{"service lists everything", service, access{kind: mayListSagas}, ""},
		{"service lists anyone's", service, access{kind: mayListSagas, user: 8}, ""},

		{"create-only service creates a user", serviceOnly, access{kind: mayCreateUser}, ""},
		{"create-only service acts for nobody", serviceOnly, access{kind: mayActFor, user: 8}, "only creates users"},
		{"create-only service pays for nobody", serviceOnly, access{kind: mayPay, user: 8}, "only creates users"},
		{"create-only service reads no saga", serviceOnly, access{kind: mayReadSaga, user: 8, saga: 1}, "only creates users"},
		{"create-only service lists nothing", serviceOnly, access{kind: mayListSagas}, "only creates users"},

		{"user acts for itself", user7, access{kind: mayActFor, user: 7}, ""},
		{"user acts for no one else", user7, access{kind: mayActFor, user: 8}, "acts for user 7, not user 8"},
		{"user pays from itself", user7, access{kind: mayPay, user: 7}, ""},
		{"user pays from no one else", user7, access{kind: mayPay, user: 8}, "paid by that user, not user 8"},
		{"user reads its saga", user7, access{kind: mayReadSaga, user: 7, saga: 1}, ""},
		{"payee reads the transfer", user7, access{kind: mayReadSaga, user: 8, counterparty: 7, saga: 2}, ""},
		{"user reads no other saga", user7, access{kind: mayReadSaga, user: 8, counterparty: 9, saga: 3}, "saga 3 is not one of user 7's"},
		{"user reads no other deposit", user7, access{kind: mayReadSaga, user: 8, saga: 4}, "saga 4"},
		{"user lists its sagas", user7, access{kind: mayListSagas, user: 7}, ""},
		{"user lists unfiltered (confined to itself)", user7, access{kind: mayListSagas}, ""},
		{"user lists no one else's", user7, access{kind: mayListSagas, user: 8}, "not user 8's"},
		{"user creates no user", user7, access{kind: mayCreateUser}, "needs the service token"},

		{"nobody acts for anyone", nobody, access{kind: mayActFor, user: 7}, `names no wallet user: its user claim must be a user id, got "auth0|abc"`},
		{"nobody pays", nobody, access{kind: mayPay, user: 7}, "names no wallet user"},
		{"nobody reads sagas", nobody, access{kind: mayReadSaga, user: 7, saga: 1}, "names no wallet user"},
		{"nobody lists", nobody, access{kind: mayListSagas}, "names no wallet user"},
		{"nobody creates users", nobody, access{kind: mayCreateUser}, "needs the service token"},
		{"the zero caller may do nothing", caller{}, access{kind: mayActFor}, "names no wallet user"},
		{"an unknown ask is refused", user7, access{user: 7}, "no user token may do this"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := authorize(tc.who, tc.what)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			var e *apperr.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, apperr.Forbidden, e.Code)
			require.Contains(t, e.Message, tc.want)
		})
	}
}

func TestSagaListUser(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(7), sagaListUser(caller{user: 7}, 0), "a user's unfiltered list is its own")
	require.Equal(t, int64(7), sagaListUser(caller{user: 7}, 7))
	require.Equal(t, int64(0), sagaListUser(caller{service: true, forAll: true}, 0), "the service lists everyone's")
	require.Equal(t, int64(8), sagaListUser(caller{service: true, forAll: true}, 8))
}

// TestARequestOfNoKnownCallerTakesNoSagaSlot: the bound on sagas in flight admits a request
// once its caller is known, so a flood with tokens that do not verify is answered 401/403
// without taking the slots of the deposits the backend sends, and without a 503 to itself.
func TestARequestOfNoKnownCallerTakesNoSagaSlot(t *testing.T) {
	t.Parallel()
	var r httpx.Refusals
	a := authenticator{serviceToken: "the-service-token-of-this-test"}
	entered, release := make(chan struct{}), make(chan struct{})
	h := a.route(func(c echo.Context, _ caller) error {
		close(entered)
		<-release
		return c.NoContent(http.StatusOK)
	}, httpx.InFlight(1, &r))
	e := echo.New()
	call := func(token string) error {
		req := httptest.NewRequest(http.MethodPost, "/v1/users/1/deposits", nil)
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+token)
		return h(e.NewContext(req, httptest.NewRecorder()))
	}
	done := make(chan error)
	go func() { done <- call("the-service-token-of-this-test") }()
	<-entered // the backend's deposit holds the one slot
	for range 3 {
		err := call("a-forged-token")
		require.Equal(t, apperr.Forbidden, apperr.CodeOf(err), "refused as no caller, not as past the bound: %v", err)
	}
	require.Zero(t, r.InFlight.Load())
	err := call("the-service-token-of-this-test")
	require.ErrorIs(t, err, httpx.ErrRefused, "a known caller past the bound")
	close(release)
	require.NoError(t, <-done)
}

// Which source a deposit may charge, as a table: the service token any; a user token the
// default source and the card tokens its sources claim lists, exactly as spelled there.
func TestAuthorizeSource(t *testing.T) {
	t.Parallel()
	var (
		service = caller{service: true, forAll: true}
		ann     = caller{user: 7, claim: "7", sources: []string{"tok_ann_visa", "tok_ann_mc"}}
		bare    = caller{user: 7, claim: "7"}
	)
	for _, tc := range []struct {
		name   string
		who    caller
		source string
		want   string // "" when allowed, else a part of the 403's message
	}{
		{"service: any source", service, "tok_bob_visa", ""},
		{"service: the default", service, "", ""},
		{"user: a listed source", ann, "tok_ann_mc", ""},
		{"user: the default, left out", ann, "", ""},
		{"user: the default, named", ann, wallet.DefaultSource, ""},
		{"user: someone else's card", ann, "tok_bob_visa", `source "tok_bob_visa" is not one of the 2 payment sources this token lists for user 7`},
		{"user: a listed source spelled otherwise", ann, "TOK_ANN_VISA", "is not one of"},
		{"user: a listed source with a prefix", ann, "tok_ann_visa2", "is not one of"},
		{"user listing none: the default", bare, "", ""},
		{"user listing none: any card", bare, "tok_ann_visa", `lists no payment source of user 7: it deposits from the default source "card" only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := authorizeSource(tc.who, tc.source)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			var e *apperr.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, apperr.Forbidden, e.Code)
			require.Contains(t, e.Message, tc.want)
		})
	}
}
