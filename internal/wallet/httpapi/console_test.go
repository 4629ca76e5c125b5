package httpapi_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// The saga console follows a page that came back empty with a next_cursor (the list read its
// budget of sagas without finding one of the wallet's): 6,500 failed sagas without the
// wallet's row, newer than the one failed saga of the wallet's, make the console's first
// request empty. It follows on by itself five times (6,000 sagas read), then says that none
// was found so far but more remain, with Older enabled, and never "No saga in this state";
// Older then shows the wallet's saga, on the last page. The panel of sagas that need
// attention, with none, says so.
func TestTheConsoleFollowsShortPages(t *testing.T) {
	t.Parallel()
	bin := testenv.Chromium(t)
	s := newServer(t, false)
	user := s.createUser(t)
	var failed int64
	require.NoError(t, s.pool.QueryRow(s.ctx, `
WITH g AS (INSERT INTO sagas (kind, state) VALUES ('deposit', 'failed') RETURNING id)
INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency, source)
SELECT id, 'deposit', $1, 1, 'CNY', 'card' FROM g RETURNING saga_id`, user).Scan(&failed))
	_, err := s.pool.Exec(s.ctx, `INSERT INTO sagas (kind, state) SELECT 'deposit', 'failed' FROM generate_series(1, 6500)`)
	require.NoError(t, err)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-quic", true))...)
	defer cancelAlloc()
	browser, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	require.NoError(t, chromedp.Do(browser, chromedp.Navigate(s.url+"/assets/style.css")))
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(s.url+"/#token="+aliceToken)))
	consoleWait(ctx, t, `performance.getEntriesByName("attention-rendered").length > 0`)
	consoleWait(ctx, t, `!document.querySelector("#attention .empty").hidden`)
	require.True(t, evalBool(ctx, t, `document.querySelector("#attention .more").hidden`), "no saga needs attention, and none remains")

	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](
		`document.getElementById("state").value = "failed"; document.getElementById("state").dispatchEvent(new Event("change"))`)))
	consoleWait(ctx, t, `!document.querySelector("#by-state .more").hidden`)
	require.True(t, evalBool(ctx, t, `document.querySelector("#by-state .empty").hidden`), "the console never says none while more remain")
	require.False(t, evalBool(ctx, t, `document.querySelector("#by-state .next").disabled`), "Older reads on")
	require.Zero(t, evalInt(ctx, t, `document.querySelectorAll("#by-state .list li").length`))
	requests := evalInt(ctx, t, `performance.getEntriesByType("resource").filter((r) => r.name.includes("state=failed")).length`)
	require.Equal(t, 6, requests, "the first page and five more followed by themselves")

	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#by-state .next"))))
	consoleWait(ctx, t, `document.querySelectorAll("#by-state .list li").length === 1`)
	require.Equal(t, strconv.FormatInt(failed, 10), evalString(ctx, t, `document.querySelector("#by-state .list li").dataset.id`))
	require.True(t, evalBool(ctx, t, `document.querySelector("#by-state .next").disabled`), "the last page")
	require.True(t, evalBool(ctx, t, `document.querySelector("#by-state .more").hidden`))
	require.Equal(t, "page 2", evalString(ctx, t, `document.querySelector("#by-state .page-no").textContent`))
}

// The saga console acts with the operator's token alone: opened with bob's token (from a
// link's fragment, asking for no name), it lists the saga that needs attention and resolves
// it with the reason typed; the audit row names bob, the token's operator.
func TestConsoleActsAsTheTokensOperatorInChromium(t *testing.T) {
	t.Parallel()
	bin := testenv.Chromium(t)
	s := newServer(t, false)
	id := s.needsAttention(t, s.createUser(t))

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-quic", true))...)
	defer cancelAlloc()
	browser, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(s.url+"/#token="+bobToken)))
	item := `document.querySelector('#attention li.saga[data-id="` + id + `"] button.resolve')`
	consoleWait(ctx, t, item)
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById("reason").value = "refunded by hand, OPS-11"; `+item+`.click(); return true; })()`))
	require.NoError(t, err)
	consoleWait(ctx, t, `document.getElementById("op-result").textContent.includes("resolve done, now resolved")`)

	var actor, reason string
	require.NoError(t, s.pool.QueryRow(s.ctx, `SELECT actor, reason FROM audit WHERE saga_id = $1`, id).Scan(&actor, &reason))
	require.Equal(t, "bob@ops", actor, "the token's operator")
	require.Equal(t, "refunded by hand, OPS-11", reason)
	require.True(t, evalBool(ctx, t, `document.getElementById("login").hidden && !document.getElementById("operator")`), "the page asked for no name")
}

// consoleWait polls the JavaScript expression in the tab until it is true, for at most 20 s.
func consoleWait(ctx context.Context, t *testing.T, expr string) {
	t.Helper()
	wait.Until(t, 20*time.Second, expr, func() bool {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`Boolean(`+expr+`)`))
		return err == nil && ok
	})
}

func evalBool(ctx context.Context, t *testing.T, expr string) bool {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	require.NoError(t, err)
	return v
}

func evalInt(ctx context.Context, t *testing.T, expr string) int {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
	require.NoError(t, err)
	return v
}

func evalString(ctx context.Context, t *testing.T, expr string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	require.NoError(t, err)
	return v
}
