// The dev stack (scripts/services.sh) as the binaries default to it in dev.

package cli

// DevDatabaseURL and DevNamesrv are the dev stack's database and name server.
const (
	DevDatabaseURL = "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable" //nolint:gosec // G101: the dev stack's documented password
	DevNamesrv     = "127.0.0.1:9876"
)

// devBrokerUsers are the users scripts/services.sh creates on the dev broker for the
// services, each with its documented secret, which production refuses.
var devBrokerUsers = map[string]string{
	// walletsvc publishes to wallet-events only.
	"walletsvc": "walletsaga-dev-walletsvc-secret",
	// The notifier consumes wallet-events as wallet-notifier, and publishes to and reads its
	// dead-letter topic.
	"notifier": "walletsaga-dev-notifier-secret",
}

// DevRocketMQSecret is the documented secret of user on the dev broker, "" for a user the
// dev stack does not create.
func DevRocketMQSecret(user string) string { return devBrokerUsers[user] }
