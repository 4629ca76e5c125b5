package httpapi_test

import (
	"bytes"
	"context"
	"io/fs"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/web"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// dumpDOM loads url in headless Chromium and returns the DOM once the page's scripts have
// run for budget of virtual time (Chromium fast-forwards timers and waits for fetches).
func dumpDOM(t *testing.T, bin, url string, budget time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget="+strconv.FormatInt(budget.Milliseconds(), 10),
		"--dump-dom", url)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "chromium: %s", stderr.String())
	require.Contains(t, stdout.String(), "</html>", "chromium dumped no DOM: %s", stderr.String())
	return stdout.String()
}

var liRe = regexp.MustCompile(`(?s)<li class="([^"]*)" data-user="(\d+)" data-seq="(\d+)" data-status="([^"]*)"[^>]*>(.*?)</li>`)

type pageItem struct{ class, user, seq, status, body string }

// panelItems returns the SMS items of one panel of the dumped page (its section's id), in
// DOM order.
func panelItems(t *testing.T, dom string, panel string) []pageItem {
	t.Helper()
	start := strings.Index(dom, `id="`+panel+`"`)
	require.GreaterOrEqual(t, start, 0, "panel %s is on the page:\n%s", panel, dom)
	sec := dom[start:]
	if end := strings.Index(sec, "</section>"); end >= 0 {
		sec = sec[:end]
	}
	var items []pageItem
	for _, m := range liRe.FindAllStringSubmatch(sec, -1) {
		items = append(items, pageItem{m[1], m[2], m[3], m[4], m[5]})
	}
	return items
}

func TestPageInChromium(t *testing.T) {
	t.Parallel()
	bin := testenv.Chromium(t)

	// Once the page has read the recent activity once, a new SMS arrives (user 1 seq 4) and a
	// new user appears: the final DOM must show both, so the page updates live.
	var once sync.Once
	var pool atomic.Pointer[pgxpool.Pool] // set once newEnv returns, read by the server
	e := newEnv(t, func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if c.Path() == "/v1/activity" {
				once.Do(func() {
					notifytest.Seed(t, pool.Load(),
						notifytest.Row{Event: notifytest.Event(1, 4, walletevent.Deposit, 100), Status: gate.StatusSent,
							Text: "You topped up 1.00 CNY. Balance: 51.00 CNY.", FinishedAt: time.Now()},
						notifytest.Row{Event: notifytest.Event(3, 1, walletevent.Deposit, 700), Status: gate.StatusSent,
							Text: "You topped up 7.00 CNY. Balance: 7.00 CNY.", FinishedAt: time.Now()})
				})
			}
			return err
		}
	})

	pool.Store(e.pool)

	// Without a token the page shows no data and asks for one; a wrong one is refused with
	// the server's message.
	dom := dumpDOM(t, bin, e.srv.URL+"/", 2*time.Second)
	require.Regexp(t, `<form id="login" class="login">`, dom, "the token form is shown:\n%s", dom)
	require.NotContains(t, dom, `data-user="1"`)
	dom = dumpDOM(t, bin, e.srv.URL+"/#token=not-the-read-token-at-all", 2*time.Second)
	require.Regexp(t, `<form id="login" class="login">`, dom)
	require.Contains(t, dom, "The token was refused: the read token is not valid")
	require.NotContains(t, dom, `data-user="1"`)

	// With the read token (a link may carry it in its fragment, which never reaches the
	// server) the page reads the log; the fragment is taken out of the address bar.
	start := time.Now()
	dom = dumpDOM(t, bin, e.srv.URL+"/#token="+readToken, 5*time.Second)
	t.Logf("chromium took %s", time.Since(start).Round(time.Millisecond))
	require.Regexp(t, `<form id="login" class="login" hidden="">`, dom, "the token form is hidden once the page reads the log")
	require.Contains(t, dom, `<div id="console">`, "the console is shown")
	// A dumped DOM has no computed styles: the attribute hides the form only while no rule of
	// the style sheet gives it a display of its own, which .login does.
	css, err := fs.ReadFile(web.FS, "style.css")
	require.NoError(t, err)
	require.Contains(t, string(css), "[hidden] { display: none !important; }")

	// The recent activity, newest first: the two SMS that came while the page was open
	// first, the dead letter marked.
	items := panelItems(t, dom, "activity")
	require.Len(t, items, 6, "the seeded SMS and the live ones:\n%s", dom)
	var got []string
	byKey := map[string]pageItem{}
	for _, it := range items {
		got = append(got, it.user+":"+it.seq)
		byKey[it.user+":"+it.seq] = it
	}
	require.ElementsMatch(t, []string{"3:1", "1:4"}, got[:2], "the live SMS come first")
	require.ElementsMatch(t, []string{"1:1", "1:2", "1:3", "2:1"}, got[2:])
	require.Contains(t, byKey["1:4"].body, "You topped up 1.00 CNY. Balance: 51.00 CNY.")
	require.Contains(t, byKey["2:1"].body, "You received 20.00 CNY from another user. Balance: 120.00 CNY.")
	dead := byKey["1:2"]
	require.Contains(t, dead.class, "dead-letter")
	require.Equal(t, "dead_lettered", dead.status)
	require.Contains(t, dead.body, `<span class="badge">dead-lettered</span>`)
	require.Contains(t, dead.body, "dead-lettered after 5 attempts: simulated failure: amount -404")
	for _, k := range []string{"1:1", "1:3", "1:4", "2:1", "3:1"} {
		require.NotContains(t, byKey[k].class, "dead-letter")
		require.Equal(t, "sent", byKey[k].status)
	}
	deadPanel := panelItems(t, dom, "dead")
	require.Len(t, deadPanel, 1, "the dead letters panel")
	require.Equal(t, "1:2", deadPanel[0].user+":"+deadPanel[0].seq)
	require.Contains(t, deadPanel[0].body, `class="replay"`)
	require.Contains(t, dom, `data-state="live"`)
}
