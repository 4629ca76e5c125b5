// Secrets: token strength, secrets that must differ, the broker credentials, and secret files.

package cli

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
)

// MinTokenLen is the shortest bearer token accepted.
const MinTokenLen = 16

// MinSecretBits is the least a secret must be worth in production, as SecretBits estimates
// it. 2^64 guesses are out of reach of anyone guessing over the network (a million a second
// for half a million years), and a value from a random generator passes with room to spare
// (`openssl rand -base64 32`: about 190 bits); what fails are values a person typed or
// patterned: one character repeated, a counting run such as 1234567890123456 (about 52),
// a short word list. The estimate never credits more than log2(length) bits a character, so
// a random value shorter than about 20 characters may fail too: take 24 or more.
const MinSecretBits = 64

// SecretBits estimates what v is worth in bits: its length times the Shannon entropy of its
// own characters' frequencies. It measures how varied the characters are, not where they
// came from: a dictionary phrase scores as its letters do. It is a floor against typed and
// patterned values, not proof of randomness.
func SecretBits(v string) float64 {
	runes := []rune(v)
	if len(runes) == 0 {
		return 0
	}
	counts := map[rune]int{}
	for _, r := range runes {
		counts[r]++
	}
	n := float64(len(runes))
	var h float64
	for _, c := range counts {
		q := float64(c) / n
		h -= q * math.Log2(q)
	}
	return h * n
}

// DocumentedSecrets is every secret value the repository hands out (the README, docs/, the
// compose file, scripts/, the dev stack's and the bench's defaults): anyone who read it knows
// them, so production refuses each of them for every secret. TestEveryDocumentedSecretIsListed
// reads the repository for such values and fails on one missing here. Each is written in
// lower case: IsDocumentedSecret compares in any case.
var DocumentedSecrets = []string{
	"walletsaga-dev-service-token",    // walletsvc's SERVICE_TOKEN in dev, the demo, chaos
	"walletsaga-dev-provider-token",   // the provider simulator's token (walletsvc's provider tokens in dev)
	"walletsaga-dev-walletsvc-secret", // the dev broker's walletsvc user
	"walletsaga-dev-notifier-secret",  // the dev broker's notifier user
	"walletsaga-dev-admin-secret",     // the dev broker's admin (mqadmin, tests, bench)
	"walletsaga-dev-operator-token",   // the compose stack's one operator (dev-operator)
	"walletsaga-demo-read-token",      // the notifier's READ_TOKEN in the demo and the compose stack
	"walletsaga-dev-grafana-admin",    // the compose stack's Grafana admin password
	"walletsaga-bench-service-token",  // the bench's walletsvc
	"walletsaga-bench-read-token",     // the bench's notifier
	"walletsaga-bench-metrics-token",  // the bench's abuse part: its scrapers
	"change-me-at-least-16",           // the README's example of the retired ADMIN_TOKEN, which deployments may have copied
	"walletsaga",                      // the dev stack's and the compose stack's Postgres password
}

// documentedPrefixes mark the families the repository names its dev, demo and bench secrets
// from: a value of theirs that is not listed (a test's) is refused all the same.
var documentedPrefixes = []string{"walletsaga-dev-", "walletsaga-demo-", "walletsaga-bench-"}

// IsDocumentedSecret reports whether v is a secret the repository documents: one of
// DocumentedSecrets, or of their families, in any case (Walletsaga-Dev-Service-Token is the
// first guess of whoever read walletsaga-dev-service-token).
func IsDocumentedSecret(v string) bool {
	v = strings.ToLower(v)
	if slices.Contains(DocumentedSecrets, v) {
		return true
	}
	for _, p := range documentedPrefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// CheckToken validates a secret named field: when required it must be set; when set it must
// be at least MinTokenLen characters and, in production, neither a documented secret nor
// worth less than MinSecretBits. The value never appears in a problem.
func (p *Problems) CheckToken(mode Mode, field, v string, required bool) {
	switch {
	case v == "" && required:
		p.Addf(field, "required (set %s or %s_FILE)", field, field)
	case v == "":
	case len(v) < MinTokenLen:
		p.Addf(field, "must be at least %d characters", MinTokenLen)
	case mode == Production && IsDocumentedSecret(v):
		p.Addf(field, "is a secret the repository documents for its dev stack or examples; production needs one of its own")
	case mode == Production && SecretBits(v) < MinSecretBits:
		p.Addf(field, "is too predictable: about %.0f bits by the variety of its characters, at least %d needed (take 24 or more random characters, e.g. openssl rand -base64 32)", SecretBits(v), MinSecretBits)
	}
}

// NamedSecret is one secret of a binary, for CheckDistinct: the setting it comes from and
// its value.
type NamedSecret struct {
	Field string
	Value string
}

// CheckDistinct refuses two secrets of a binary that share a value, naming both settings
// (never the value): each secret is one party's for one purpose, and one used twice lets
// whoever holds it for one purpose (a provider that receives its token, a leak of one) act
// for the other. In dev the documented secrets are exempt: the dev stack shares them on
// purpose (the simulator is both the gateway and the merchant).
func (p *Problems) CheckDistinct(mode Mode, secrets ...NamedSecret) {
	for i, b := range secrets {
		if b.Value == "" || mode == Dev && IsDocumentedSecret(b.Value) {
			continue
		}
		for _, a := range secrets[:i] {
			if a.Value == b.Value {
				p.Addf(b.Field, "must differ from %s: one secret for two purposes lets whoever holds it for one act for the other", a.Field)
				break
			}
		}
	}
}

// UnsignedBrokerEnv names the override of the broker credentials' requirement: its value is
// the network boundary that keeps everyone else off a broker without access control.
const UnsignedBrokerEnv = "ALLOW_UNSIGNED_BROKER"

// CheckBroker validates the RocketMQ user a binary signs as (ROCKETMQ_ACCESS_KEY and
// ROCKETMQ_SECRET_KEY) and the override unsigned (ALLOW_UNSIGNED_BROKER). A process that
// serves in production must sign, unless unsigned states the network boundary that replaces
// access control: unsigned, anyone who reaches the broker can publish to the topic, and the
// notifier texts whatever phone a message names.
func (p *Problems) CheckBroker(mode Mode, serving bool, accessKey, secretKey, unsigned string) {
	switch {
	case accessKey != "" && secretKey == "":
		p.Addf("ROCKETMQ_SECRET_KEY", "required with ROCKETMQ_ACCESS_KEY %q (or ROCKETMQ_SECRET_KEY_FILE)", accessKey)
	case accessKey == "" && secretKey != "":
		p.Addf("ROCKETMQ_ACCESS_KEY", "required with ROCKETMQ_SECRET_KEY (the user it is the secret of)")
	case accessKey != "" && unsigned != "":
		p.Addf(UnsignedBrokerEnv, "is set, but ROCKETMQ_ACCESS_KEY signs the requests: leave it unset (it is for a broker without access control only)")
	case accessKey == "" && unsigned == "" && serving && mode == Production:
		p.Addf("ROCKETMQ_ACCESS_KEY", "required in production, with ROCKETMQ_SECRET_KEY or ROCKETMQ_SECRET_KEY_FILE: unsigned, anyone who reaches the broker can publish to the topic (and have the notifier text any phone); for a broker without access control, set %s to the network boundary that keeps everyone else off it", UnsignedBrokerEnv)
	}
	if mode == Production {
		p.CheckToken(mode, "ROCKETMQ_SECRET_KEY", secretKey, false)
	}
	p.CheckOverride(UnsignedBrokerEnv, unsigned)
}

// LogBroker says at start that requests to the broker go unsigned, when they do: in
// production with the reason ALLOW_UNSIGNED_BROKER gives (CheckBroker refuses it without).
func LogBroker(log *slog.Logger, mode Mode, accessKey, unsigned string) {
	switch {
	case accessKey != "":
	case unsigned != "":
		log.Warn("requests to the broker are unsigned, as "+UnsignedBrokerEnv+" says: only the network keeps others from publishing to the topic", "reason", unsigned)
	default:
		log.Warn("ROCKETMQ_ACCESS_KEY is not set: requests to the broker are unsigned, so only a broker without access control takes them (production refuses this unless "+UnsignedBrokerEnv+" names the network boundary)", "mode", mode)
	}
}

// ReadSecret returns the secret in file (trimmed) when file is set, else value. field names
// the setting in errors; the secret itself never appears in them.
func ReadSecret(field, value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // G304: the operator names the file (…_TOKEN_FILE); reading it is the point
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return strings.TrimSpace(string(b)), nil
}
