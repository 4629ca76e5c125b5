package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/openapicheck"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

// signUp creates a user named name with phone, with the service token, and returns its id.
func (s *server) signUp(t *testing.T, name, phone string) int64 {
	t.Helper()
	res := s.do(t, http.MethodPost, "/v1/users", fmt.Sprintf(`{"name":%q,"phone":%q}`, name, phone))
	require.Equal(t, http.StatusCreated, res.status, res.raw)
	return int64(res.body["id"].(float64))
}

// The wallet's database is backed up while in use (pg_dump); Bob signs up after the backup,
// gets a token and deposits; then the database is restored (pg_restore into a new database,
// which a new walletsvc serves) and Carol is the first to sign up. Carol must not get Bob's
// id: the restored database has forgotten Bob, not the time. Bob's token, for a user the
// restore lost, is refused on every user-facing route with a 4xx JSON error that names
// nothing of Carol's, and writes nothing; Ann, who signed up before the backup, keeps her id,
// her money and her token's access.
func TestATokenFromLostHistoryReachesNoOneElse(t *testing.T) {
	t.Parallel()
	opts := httpapi.Options{ServiceToken: serviceToken, Operators: operators, UserTokens: userTokens(t)}
	pool, dbURL := testdb.New(t)
	lost := newServerOn(t, pool, false, opts)
	ann := lost.signUp(t, "Ann Kept", "+8613800000011")
	annsID := strconv.FormatInt(ann, 10)
	res := lost.do(t, http.MethodPost, "/v1/users/"+annsID+"/deposits?wait=true", `{"amount":3000}`, as(userToken(t, ann, nil))...)
	require.Equal(t, http.StatusOK, res.status, res.raw)

	backup := testdb.Dump(t, dbURL)

	bob := lost.signUp(t, "Bob Lost", "+8613800000022")
	bobsID := strconv.FormatInt(bob, 10)
	bobs := as(userToken(t, bob, nil))
	bobsDeposit := lost.sagaID(t, lost.do(t, http.MethodPost, "/v1/users/"+bobsID+"/deposits?wait=true", `{"amount":5000}`, bobs...))

	restored, _ := testdb.Restore(t, backup)
	s := newServerOn(t, restored, false, opts)
	carol := s.signUp(t, "Carol Restored", "+8613900000777")
	require.NotEqual(t, bob, carol, "Carol got the id of Bob, whom the restore lost: Bob's token would act for her")
	carolsID := strconv.FormatInt(carol, 10)
	carolsDeposit := s.sagaID(t, s.do(t, http.MethodPost, "/v1/users/"+carolsID+"/deposits?wait=true", `{"amount":7777}`, as(userToken(t, carol, nil))...))

	// Bob's token on every user-facing route; his deposit's saga id is the restored
	// database's to give again (its sagas are numbered by the database), and Carol's may be it.
	routes := []struct{ route, path, body string }{
		{"POST /v1/users", "/v1/users", `{"name":"Bob Again","phone":"+8613800000022"}`},
		{"GET /v1/users/{id}/wallet", "/v1/users/" + bobsID + "/wallet", ""},
		{"GET /v1/users/{id}/events", "/v1/users/" + bobsID + "/events", ""},
		{"POST /v1/users/{id}/deposits", "/v1/users/" + bobsID + "/deposits?wait=true", `{"amount":100}`},
		{"POST /v1/users/{id}/purchases", "/v1/users/" + bobsID + "/purchases?wait=true", `{"amount":100,"merchant":"coffee","reference":"r-1"}`},
		{"POST /v1/users/{id}/withdrawals", "/v1/users/" + bobsID + "/withdrawals?wait=true", `{"amount":100,"destination":"bank"}`},
		{"POST /v1/transfers", "/v1/transfers?wait=true", fmt.Sprintf(`{"from":%d,"to":%d,"amount":100}`, bob, carol)},
		{"GET /v1/sagas", "/v1/sagas", ""},
		{"GET /v1/sagas", "/v1/sagas?user_id=" + bobsID, ""},
		{"GET /v1/sagas/{id}", "/v1/sagas/" + bobsDeposit, ""},
		{"GET /v1/sagas/{id}", "/v1/sagas/" + carolsDeposit, ""},
	}
	var named, registered []string
	for _, r := range routes {
		named = append(named, r.route)
	}
	for _, r := range openapicheck.Routes(s.echo.Routes()) {
		if strings.Contains(r, "/v1/") && !strings.Contains(r, "/v1/operator/") && !strings.HasSuffix(r, "/retry") && !strings.HasSuffix(r, "/resolve") && !strings.HasSuffix(r, "/audit") {
			registered = append(registered, r)
		}
	}
	slices.Sort(named)
	slices.Sort(registered)
	require.Equal(t, registered, slices.Compact(named), "every user-facing route is in this table")

	before := s.counts(t)
	for _, r := range routes {
		res := s.do(t, strings.Fields(r.route)[0], r.path, r.body, bobs...)
		require.True(t, res.status >= 400 && res.status < 500, "%s with Bob's token: %d %s", r.path, res.status, res.raw)
		require.Len(t, res.body, 1, "%s: an error and nothing else: %s", r.path, res.raw)
		e, ok := res.body["error"].(map[string]any)
		require.True(t, ok, "%s: %s", r.path, res.raw)
		require.Len(t, e, 2, "%s: a code and a message: %s", r.path, res.raw)
		require.NotEmpty(t, e["code"], res.raw)
		for _, carols := range []string{carolsID, "Carol", "+8613900000777"} {
			require.NotContains(t, e["message"], carols, "%s names Carol's data: %s", r.path, res.raw)
		}
	}
	require.Equal(t, before, s.counts(t), "a refused request wrote nothing")

	res = s.do(t, http.MethodGet, "/v1/users/"+annsID+"/wallet", "", as(userToken(t, ann, nil))...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, map[string]any{"user_id": float64(ann), "balance": float64(3000), "currency": "CNY", "last_seq": float64(1)}, res.body)
}
