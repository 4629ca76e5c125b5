package notify_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func TestRender(t *testing.T) {
	t.Parallel()
	ev := func(kind walletevent.Kind, amount, balance int64, locale string) walletevent.Event {
		e := notifytest.Event(7, 3, kind, amount)
		e.BalanceAfter, e.Locale = balance, locale
		return e
	}
	tests := []struct {
		name   string
		event  walletevent.Event
		locale string
		text   string
	}{
		{"en deposit", ev(walletevent.Deposit, 10000, 10000, "en"), "en", "You topped up 100.00 CNY. Balance: 100.00 CNY."},
		{"en purchase", ev(walletevent.Purchase, -5000, 5000, "en"), "en", "You paid 50.00 CNY for a purchase. Balance: 50.00 CNY."},
		{"en refund", ev(walletevent.Refund, 5000, 10000, "en"), "en", "Refund of 50.00 CNY for a cancelled purchase. Balance: 100.00 CNY."},
		{"en transfer out", ev(walletevent.TransferOut, -2050, 7950, "en"), "en", "You sent 20.50 CNY to another user. Balance: 79.50 CNY."},
		{"en transfer in", ev(walletevent.TransferIn, 2050, 2050, "en"), "en", "You received 20.50 CNY from another user. Balance: 20.50 CNY."},
		{"en reversal", ev(walletevent.Reversal, 2050, 10000, "en"), "en", "Your transfer of 20.50 CNY did not go through and was returned. Balance: 100.00 CNY."},
		{"en withdrawal", ev(walletevent.Withdrawal, -3000, 7000, "en"), "en", "You withdrew 30.00 CNY to your bank account. Balance: 70.00 CNY."},
		{"en withdrawal refund", ev(walletevent.WithdrawalRefund, 3000, 10000, "en"), "en", "Your withdrawal of 30.00 CNY did not go through and was refunded. Balance: 100.00 CNY."},
		{"zh deposit", ev(walletevent.Deposit, 10000, 10000, "zh-CN"), "zh-CN", "您已充值 100.00 CNY，余额 100.00 CNY。"},
		{"zh purchase", ev(walletevent.Purchase, -5000, 5000, "zh-CN"), "zh-CN", "您已消费 50.00 CNY，余额 50.00 CNY。"},
		{"zh refund", ev(walletevent.Refund, 5000, 10000, "zh-CN"), "zh-CN", "您取消的订单已退款 50.00 CNY，余额 100.00 CNY。"},
		{"zh transfer out", ev(walletevent.TransferOut, -1, 0, "zh-CN"), "zh-CN", "您已转出 0.01 CNY，余额 0.00 CNY。"},
		{"zh transfer in", ev(walletevent.TransferIn, 99, 99, "zh-CN"), "zh-CN", "您收到转账 0.99 CNY，余额 0.99 CNY。"},
		{"zh reversal", ev(walletevent.Reversal, 404, 404, "zh-CN"), "zh-CN", "您的转账 4.04 CNY 未成功，已退回，余额 4.04 CNY。"},
		{"zh withdrawal", ev(walletevent.Withdrawal, -3000, 7000, "zh-CN"), "zh-CN", "您已提现 30.00 CNY 至银行账户，余额 70.00 CNY。"},
		{"zh withdrawal refund", ev(walletevent.WithdrawalRefund, 3000, 10000, "zh-CN"), "zh-CN", "您的提现 30.00 CNY 未成功，已退回，余额 100.00 CNY。"},
		{"zh variants", ev(walletevent.Deposit, 100, 100, "zh_cn"), "zh-CN", "您已充值 1.00 CNY，余额 1.00 CNY。"},
		{"plain zh", ev(walletevent.Deposit, 100, 100, "zh"), "zh-CN", "您已充值 1.00 CNY，余额 1.00 CNY。"},
		{"unknown locale falls back to en", ev(walletevent.Deposit, 100, 100, "fr-FR"), "en", "You topped up 1.00 CNY. Balance: 1.00 CNY."},
		{"empty locale is en", ev(walletevent.Deposit, 100, 100, ""), "en", "You topped up 1.00 CNY. Balance: 1.00 CNY."},
		{"other currency", func() walletevent.Event {
			e := ev(walletevent.Deposit, 123456789, 123456789, "en")
			e.Currency = "USD"
			return e
		}(), "en", "You topped up 1234567.89 USD. Balance: 1234567.89 USD."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := notify.Render(tc.event)
			require.NoError(t, err)
			require.Equal(t, tc.text, m.Text)
			require.Equal(t, tc.locale, m.Locale)
			require.Empty(t, m.IdempotencyKey, "the key needs the deployment, which the caller knows")
			require.Equal(t, int64(7), m.UserID)
			require.Equal(t, int64(3), m.Seq)
			require.Equal(t, string(tc.event.Kind), m.Kind)
			require.Equal(t, tc.event.Amount, m.Amount)
			require.Equal(t, tc.event.Phone, m.Phone)
			require.False(t, m.Late)
		})
	}
}

func TestRenderRejectsBadEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*walletevent.Event)
		msg    string
	}{
		{"unknown kind", func(e *walletevent.Event) { e.Kind = "gift" }, `unknown kind "gift"`},
		{"bad currency", func(e *walletevent.Event) { e.Currency = "YUAN" }, `bad currency "YUAN"`},
		{"no user", func(e *walletevent.Event) { e.UserID = 0 }, "user_id must be positive"},
		{"no seq", func(e *walletevent.Event) { e.Seq = 0 }, "seq must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := notifytest.Event(1, 1, walletevent.Deposit, 100)
			tc.mutate(&e)
			_, err := notify.Render(e)
			require.Error(t, err)
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestMarkLate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ locale, text string }{
		{"en", "(Delayed) You topped up 1.00 CNY. Balance: 101.00 CNY."},
		{"zh-CN", "【延迟通知】您已充值 1.00 CNY，余额 101.00 CNY。"},
	} {
		e := notifytest.Event(5, 9, walletevent.Deposit, 100)
		e.Locale = tc.locale
		m, err := notify.Render(e)
		require.NoError(t, err)
		m.IdempotencyKey = notify.ProviderKey("d", 5, 9, m.Epoch)
		late := notify.MarkLate(m)
		require.True(t, late.Late)
		require.Equal(t, fmt.Sprintf("d:5:9:%d", notifytest.Epoch), late.IdempotencyKey, "a replay keeps the SMS's key, so a provider that has it already says so")
		require.Equal(t, tc.text, late.Text)
	}
}

func TestFormatMoney(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor int64
		want  string
	}{
		{0, "0.00 CNY"}, {1, "0.01 CNY"}, {10, "0.10 CNY"}, {100, "1.00 CNY"}, {-5050, "50.50 CNY"},
		{math.MaxInt64, "92233720368547758.07 CNY"}, {math.MinInt64, "92233720368547758.08 CNY"},
	} {
		require.Equal(t, tc.want, notify.FormatMoney(tc.minor, "CNY"), "minor %d", tc.minor)
	}
}

// TestAProviderKeyNamesTheEpoch: an SMS's key names its wallet epoch, so that a seq the
// wallet handed out again after a restore is another SMS at the provider; an event from
// before epochs keeps the key it always had.
func TestAProviderKeyNamesTheEpoch(t *testing.T) {
	t.Parallel()
	require.Equal(t, "d:5:9:1767225600000000", notify.ProviderKey("d", 5, 9, 1767225600000000))
	require.Equal(t, "d:5:9", notify.ProviderKey("d", 5, 9, 0))
	require.NotEqual(t, notify.ProviderKey("d", 5, 9, 1767225600000000), notify.ProviderKey("d", 5, 9, 1767225600000001))
}
