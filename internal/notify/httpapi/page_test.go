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
	"github.com/walletsaga/walletsaga/internal/testenv"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// chromium returns the path of Debian's chromium, or fails (CI, make test) or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	testenv.SkipIfShort(t, "Chromium")
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium not found: install it with `apt-get install -y --no-install-recommends chromium`"
	if testenv.Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

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

var liRe = regexp.MustCompile(`(?s)<li class="([^"]*)" data-seq="(\d+)" data-status="([^"]*)"[^>]*>(.*?)</li>`)

type pageItem struct{ class, seq, status, body string }

// userItems returns the SMS items of one user's section of the dumped page, in DOM order.
func userItems(t *testing.T, dom string, user string) []pageItem {
	t.Helper()
	start := strings.Index(dom, `id="user-`+user+`"`)
	require.GreaterOrEqual(t, start, 0, "user %s is on the page:\n%s", user, dom)
	sec := dom[start:]
	if end := strings.Index(sec, "</section>"); end >= 0 {
		sec = sec[:end]
	}
	var items []pageItem
	for _, m := range liRe.FindAllStringSubmatch(sec, -1) {
		items = append(items, pageItem{m[1], m[2], m[3], m[4]})
	}
	return items
}

func TestPageInChromium(t *testing.T) {
	t.Parallel()
	bin := chromium(t)

	// Once the page has read the feed once, a new SMS arrives (user 1 seq 4) and a new user
	// appears: the final DOM must show both, so the page updates live.
	var once sync.Once
	var pool atomic.Pointer[pgxpool.Pool] // set once newEnv returns, read by the server
	e := newEnv(t, func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if c.Path() == "/v1/sms" {
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
	require.NotContains(t, dom, `id="user-1"`)
	dom = dumpDOM(t, bin, e.srv.URL+"/#token=not-the-read-token-at-all", 2*time.Second)
	require.Regexp(t, `<form id="login" class="login">`, dom)
	require.Contains(t, dom, "The token was refused: the read token is not valid")
	require.NotContains(t, dom, `id="user-1"`)

	// With the read token (a link may carry it in its fragment, which never reaches the
	// server) the page reads the log; the fragment is taken out of the address bar.
	start := time.Now()
	dom = dumpDOM(t, bin, e.srv.URL+"/#token="+readToken, 5*time.Second)
	t.Logf("chromium took %s", time.Since(start).Round(time.Millisecond))
	require.Regexp(t, `<form id="login" class="login" hidden="">`, dom, "the token form is hidden once the page reads the log")
	// A dumped DOM has no computed styles: the attribute hides the form only while no rule of
	// the style sheet gives it a display of its own, which .login does.
	css, err := fs.ReadFile(web.FS, "style.css")
	require.NoError(t, err)
	require.Contains(t, string(css), "[hidden] { display: none !important; }")

	u1 := userItems(t, dom, "1")
	require.Len(t, u1, 4, "user 1's SMS, the live one included:\n%s", dom)
	wantText := []string{
		"You topped up 100.00 CNY. Balance: 100.00 CNY.",
		"You paid 4.04 CNY for a purchase. Balance: 95.96 CNY.",
		"You paid 50.00 CNY for a purchase. Balance: 50.00 CNY.",
		"You topped up 1.00 CNY. Balance: 51.00 CNY.",
	}
	for i, it := range u1 {
		require.Equal(t, []string{"1", "2", "3", "4"}[i], it.seq, "seq order")
		require.Contains(t, it.body, wantText[i])
	}
	dead := u1[1]
	require.Contains(t, dead.class, "dead-letter")
	require.Equal(t, "dead_lettered", dead.status)
	require.Contains(t, dead.body, `<span class="badge">dead-lettered</span>`)
	require.Contains(t, dead.body, "dead-lettered after 5 attempts: simulated failure: amount -404")
	for _, i := range []int{0, 2, 3} {
		require.NotContains(t, u1[i].class, "dead-letter")
		require.Equal(t, "sent", u1[i].status)
	}

	u2 := userItems(t, dom, "2")
	require.Len(t, u2, 1)
	require.Contains(t, u2[0].body, "You received 20.00 CNY from another user. Balance: 120.00 CNY.")
	u3 := userItems(t, dom, "3")
	require.Len(t, u3, 1)
	require.Contains(t, u3[0].body, "You topped up 7.00 CNY. Balance: 7.00 CNY.")

	require.Less(t, strings.Index(dom, `id="user-1"`), strings.Index(dom, `id="user-2"`))
	require.Less(t, strings.Index(dom, `id="user-2"`), strings.Index(dom, `id="user-3"`))
	require.Contains(t, dom, `data-state="live"`)
}
