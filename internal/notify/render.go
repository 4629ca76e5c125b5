package notify

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// The locales Render writes. Any other locale gets English.
const (
	LocaleEN   = "en"
	LocaleZhCN = "zh-CN"
)

// templates holds, per locale and kind, a format taking the amount and the balance after,
// both already formatted with their currency ("100.00 CNY"). Every kind of
// walletevent.Kinds needs one in every locale, ending with the balance after it (the
// audit reads it there): TestEveryKindHasATemplateInEveryLocale fails on a gap, and Render
// refuses to render one.
var templates = map[string]map[walletevent.Kind]string{
	LocaleEN: {
		walletevent.Deposit:     "You topped up %s. Balance: %s.",
		walletevent.Purchase:    "You paid %s for a purchase. Balance: %s.",
		walletevent.Refund:      "Refund of %s for a cancelled purchase. Balance: %s.",
		walletevent.TransferOut: "You sent %s to another user. Balance: %s.",
		walletevent.TransferIn:  "You received %s from another user. Balance: %s.",
		walletevent.Reversal:    "Your transfer of %s did not go through and was returned. Balance: %s.",

		walletevent.Withdrawal:       "You withdrew %s to your bank account. Balance: %s.",
		walletevent.WithdrawalRefund: "Your withdrawal of %s did not go through and was refunded. Balance: %s.",
	},
	LocaleZhCN: {
		walletevent.Deposit:     "您已充值 %s，余额 %s。",
		walletevent.Purchase:    "您已消费 %s，余额 %s。",
		walletevent.Refund:      "您取消的订单已退款 %s，余额 %s。",
		walletevent.TransferOut: "您已转出 %s，余额 %s。",
		walletevent.TransferIn:  "您收到转账 %s，余额 %s。",
		walletevent.Reversal:    "您的转账 %s 未成功，已退回，余额 %s。",

		walletevent.Withdrawal:       "您已提现 %s 至银行账户，余额 %s。",
		walletevent.WithdrawalRefund: "您的提现 %s 未成功，已退回，余额 %s。",
	},
}

// latePrefix starts the text of an operator replay, so the user knows the SMS is old news.
var latePrefix = map[string]string{
	LocaleEN:   "(Delayed) ",
	LocaleZhCN: "【延迟通知】",
}

// Render returns the SMS for a balance event: its text in the event's locale (zh-CN or en;
// anything else falls back to en), amounts with two decimals and the currency. Its
// IdempotencyKey is left to the caller, who knows the deployment (ProviderKey). It returns an apperr.Invalid error for an event that fails
// validation (unknown kind, bad currency, …).
//
// A valid kind without a template in the locale is an error (apperr.Internal), never a
// text with a formatting error in it: the inbox records the message as bad and dead-letters
// it, loudly, instead of sending it.
func Render(e walletevent.Event) (SMS, error) {
	return render(e, templates)
}

// render is Render with the template table given.
func render(e walletevent.Event, table map[string]map[walletevent.Kind]string) (SMS, error) {
	if err := validateForRender(e); err != nil {
		return SMS{}, err
	}
	locale := ResolveLocale(e.Locale)
	tmpl, ok := table[locale][e.Kind]
	if !ok {
		return SMS{}, apperr.New(apperr.Internal, "render: user %d seq %d: no %s text for kind %q", e.UserID, e.Seq, locale, e.Kind)
	}
	return Compose(e, fmt.Sprintf(tmpl, FormatMoney(e.Amount, e.Currency), FormatMoney(e.BalanceAfter, e.Currency))), nil
}

// Compose returns the SMS for event e with text, the text Render gave it: the lanes send
// the text the inbox rendered and stored on arrival, with the rest (phone, locale, amount,
// when it occurred) from the stored event, so that an SMS is rendered once. Its
// IdempotencyKey is left to the caller, as Render's is.
func Compose(e walletevent.Event, text string) SMS {
	return SMS{
		UserID:       e.UserID,
		Seq:          e.Seq,
		Phone:        e.Phone,
		Locale:       ResolveLocale(e.Locale),
		Kind:         string(e.Kind),
		Amount:       e.Amount,
		Currency:     e.Currency,
		BalanceAfter: e.BalanceAfter,
		Text:         text,
		OccurredAt:   e.OccurredAt,
		Epoch:        e.Epoch,
	}
}

// validateForRender checks what Render relies on. The version is not checked: an event
// stored by the inbox is rendered again, for an operator's replay, long after it was decoded.
func validateForRender(e walletevent.Event) error {
	switch {
	case e.UserID <= 0:
		return apperr.New(apperr.Invalid, "render: user_id must be positive, got %d", e.UserID)
	case e.Seq <= 0:
		return apperr.New(apperr.Invalid, "render: user %d: seq must be positive, got %d", e.UserID, e.Seq)
	case !e.Kind.Valid():
		return apperr.New(apperr.Invalid, "render: user %d seq %d: unknown kind %q", e.UserID, e.Seq, e.Kind)
	case len(e.Currency) != 3:
		return apperr.New(apperr.Invalid, "render: user %d seq %d: bad currency %q", e.UserID, e.Seq, e.Currency)
	}
	return nil
}

// MarkLate turns a rendered SMS into an operator replay of it: Late set and the text prefixed
// with "(Delayed) " (or its zh-CN equivalent). The idempotency key stays the SMS's own
// (ProviderKey): a provider that has the SMS already (it was delivered after all) answers so, instead of
// delivering it twice.
func MarkLate(m SMS) SMS {
	m.Late = true
	m.Text = latePrefix[ResolveLocale(m.Locale)] + m.Text
	return m
}

// ResolveLocale maps a user's locale to one Render writes: zh-CN for Chinese ("zh",
// "zh-CN", "zh_cn", "zh-Hans", …), en for anything else.
func ResolveLocale(locale string) string {
	l := strings.ToLower(strings.TrimSpace(locale))
	if l == "zh" || strings.HasPrefix(l, "zh-") || strings.HasPrefix(l, "zh_") {
		return LocaleZhCN
	}
	return LocaleEN
}

// FormatMoney writes minor units as an absolute amount with two decimals and the currency:
// FormatMoney(-5050, "CNY") == "50.50 CNY". The sign is left to the words around it.
func FormatMoney(minor int64, currency string) string {
	return FormatAmount(minor) + " " + currency
}

// FormatAmount writes minor units as an absolute amount with two decimals, without the
// currency: FormatAmount(-5050) == "50.50".
func FormatAmount(minor int64) string {
	u := uint64(minor) //nolint:gosec // G115: two's complement on purpose, negated below, so math.MinInt64 formats too
	if minor < 0 {
		u = -u // two's complement: also right for math.MinInt64
	}
	whole, cents := u/100, u%100
	return strconv.FormatUint(whole, 10) + "." + strconv.FormatUint(cents/10, 10) + strconv.FormatUint(cents%10, 10)
}

// TemplateParams are the parameters of an SMS's provider template (Template), named as the
// event's fields: what the text says, for a provider that sends only templates approved
// beforehand and fills in their parameters (as mainland China's SMS providers do). Every value
// is a string, as such providers take them.
type TemplateParams struct {
	// Amount is the change, absolute, with two decimals ("50.00"): the template's words say
	// which way it went, as the text's do.
	Amount string `json:"amount"`
	// Currency is the wallet's ISO 4217 code ("CNY").
	Currency string `json:"currency"`
	// BalanceAfter is the balance once the change applied, with two decimals ("150.00").
	BalanceAfter string `json:"balance_after"`
}

// Template returns the id of the SMS's provider template and its parameters. The id is the
// event's kind (walletevent.Kinds: "deposit", "purchase", …): one template per kind, in each
// locale, saying what the notifier's text for it says (Render); the SMS's Locale picks the
// language and Late marks an operator's replay.
func (m SMS) Template() (string, TemplateParams) {
	return m.Kind, TemplateParams{Amount: FormatAmount(m.Amount), Currency: m.Currency, BalanceAfter: FormatAmount(m.BalanceAfter)}
}
