package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestWithdrawalSMSArriveInOrder: through the binaries (walletsvc, the provider simulator,
// the broker, the notifier), a user tops up, withdraws to a bank account, then withdraws to
// an account the bank refuses. The user's SMS arrive once each, in seq order: the deposit's,
// the withdrawal's, the refused withdrawal's, and its refund's after it.
func TestWithdrawalSMSArriveInOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.start("walletsvc", nil)
	n := s.start("notifier", nil)
	a := api{t: t, base: func() string { return w.url }}
	u := a.createUser("withdrawer", okPhone(3))
	a.depositWait(u, 10000, "wd-dep")
	path := fmt.Sprintf("/v1/users/%d/withdrawals?wait=true", u)
	out := a.must(200, "POST", path, "wd-1", map[string]any{"amount": 3000, "destination": "ICBC 6222 0200 1234"})
	require.Equal(t, "completed", out["state"], "%v", out)
	out = a.must(200, "POST", path, "wd-2", map[string]any{"amount": 2000, "destination": "reject-closed-account"})
	require.Equal(t, "compensated", out["state"], "%v", out)
	require.Equal(t, 1, s.count(`SELECT count(*) FROM providersim.payouts WHERE status = 'paid'`), "one payout paid")
	require.Equal(t, 1, s.count(`SELECT count(*) FROM providersim.payouts WHERE status = 'rejected'`), "one refused")

	wait.Until(t, 60*time.Second, "every SMS", s.smsDone)
	r := s.audit()
	require.Equal(t, 4, r.Events)
	require.Equal(t, 4, r.SMS)
	require.Zero(t, r.Lost+r.Duplicated+r.OutOfOrder+r.DeadLettered)

	resp, err := readNotifier(fmt.Sprintf("%s/v1/users/%d/sms", n.url, u))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var log struct {
		Items []smslog.SMSItem `json:"items"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	want := []struct{ kind, text string }{
		{"deposit", "You topped up 100.00 CNY. Balance: 100.00 CNY."},
		{"withdrawal", "You withdrew 30.00 CNY to your bank account. Balance: 70.00 CNY."},
		{"withdrawal", "You withdrew 20.00 CNY to your bank account. Balance: 50.00 CNY."},
		{"withdrawal_refund", "Your withdrawal of 20.00 CNY did not go through and was refunded. Balance: 70.00 CNY."},
	}
	require.Len(t, log.Items, len(want))
	var last time.Time
	for i, it := range log.Items {
		require.Equal(t, int64(i+1), it.Seq)
		require.Equal(t, want[i].kind, it.Kind, "seq %d", it.Seq)
		require.Equal(t, want[i].text, it.Text, "seq %d", it.Seq)
		require.Equal(t, gate.StatusSent, it.Status, "seq %d", it.Seq)
		require.NotNil(t, it.SentAt, "seq %d", it.Seq)
		require.False(t, it.SentAt.Before(last), "seq %d was sent before seq %d", it.Seq, it.Seq-1)
		last = *it.SentAt
	}
	t.Logf("withdrawals on broker %s: %d SMS in order, the refused one's refund last", s.broker.BrokerAddr, len(log.Items))
}
