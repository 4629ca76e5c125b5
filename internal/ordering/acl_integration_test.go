package ordering_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
)

// sendAs sends one keyed message to topic as creds, with a producer of its own (its own
// instance name, so its own connection and credentials), and returns the broker's answer.
func sendAs(t *testing.T, b rmqtest.Broker, creds ordering.Credentials, topic string) error {
	t.Helper()
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("it-acl-producer"),
		Credentials: creds, SendTimeout: 5 * time.Second, Retries: 1})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = p.SendOrderly(ctx, ordering.Message{Topic: topic, ShardingKey: "1", Body: []byte("acl probe")})
	return err
}

// TestTheBrokerServesOnlySignedClients: the dev broker runs with access control, so a
// producer that does not sign, signs with a wrong secret or as an unknown user is refused,
// and one that signs as a known user is served.
func TestTheBrokerServesOnlySignedClients(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic := rmqtest.Unique("it-acl")
	b.CreateTopic(t, topic, 1)

	require.NoError(t, sendAs(t, b, b.Credentials, topic), "the admin user signs and is served")
	err := sendAs(t, b, ordering.Credentials{}, topic)
	require.Error(t, err, "the broker stored an unsigned message: it runs without access control "+
		"(a broker started before it was on; restart it: scripts/services.sh restart-broker)")
	require.ErrorContains(t, err, "username cannot be null")
	err = sendAs(t, b, ordering.Credentials{AccessKey: b.Credentials.AccessKey, SecretKey: "not-the-secret"}, topic)
	require.ErrorContains(t, err, "check signature failed")
	err = sendAs(t, b, ordering.Credentials{AccessKey: rmqtest.Unique("nobody"), SecretKey: "whatever-secret"}, topic)
	require.ErrorContains(t, err, "is not found")
}

// TestTheProductUsersMayOnlyDoTheirPart: the broker authorizes each user for its own part
// only. The notifier's user may not publish balance events (which become SMS to the phone
// in them), and the wallet's user may publish to nothing but wallet-events: not to another
// topic, not to the notifier's dead-letter queue. Both are refused for want of permission,
// which also proves their dev secrets are the broker's (a wrong one is refused before).
func TestTheProductUsersMayOnlyDoTheirPart(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	users := rmqtest.DevUsers()
	other := rmqtest.Unique("it-acl-other")
	b.CreateTopic(t, other, 1)

	// Refused: nothing is stored on the real topic, so nothing reaches a notifier to text.
	// Neither without credentials (the broker signs nobody in)...
	err := sendAs(t, b, ordering.Credentials{}, "wallet-events")
	require.ErrorContains(t, err, "username cannot be null")
	// ...nor as the notifier, whose secret sits beside the phone numbers it texts.
	err = sendAs(t, b, users.Notifier, "wallet-events")
	require.ErrorContains(t, err, "User:"+users.Notifier.AccessKey+" has no permission to access Topic:wallet-events")
	err = sendAs(t, b, users.Wallet, other)
	require.ErrorContains(t, err, "User:"+users.Wallet.AccessKey+" has no permission to access Topic:"+other)
	err = sendAs(t, b, users.Wallet, ordering.DLQTopic("wallet-notifier"))
	require.ErrorContains(t, err, "has no permission to access Topic:"+ordering.DLQTopic("wallet-notifier"))
	require.NoError(t, sendAs(t, b, users.Admin, other), "the same topic takes the admin's message")
}
