package ordering

import (
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Credentials are the RocketMQ user a client signs its requests as (the broker's access
// control: ACL 2.0, where the access key is the user name and the secret key its password).
// The zero value signs nothing, for a broker without access control.
type Credentials struct {
	AccessKey string
	SecretKey string
}

// IsZero reports whether c signs nothing: either key missing.
func (c Credentials) IsZero() bool { return c.AccessKey == "" || c.SecretKey == "" }

// String names the user and never the secret, so a logged config does not leak it.
func (c Credentials) String() string {
	if c.IsZero() {
		return "unsigned"
	}
	return "user " + c.AccessKey
}

func (c Credentials) primitive() primitive.Credentials {
	return primitive.Credentials{AccessKey: c.AccessKey, SecretKey: c.SecretKey}
}

// NewAdmin returns the client's admin API (topic routes from the name servers, topics
// created on a broker), its requests signed with creds (zero: unsigned).
func NewAdmin(namesrv []string, creds Credentials) (admin.Admin, error) {
	opts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver(namesrv))}
	if !creds.IsZero() {
		opts = append(opts, admin.WithCredentials(creds.primitive()))
	}
	adm, err := admin.NewAdmin(opts...)
	if err != nil {
		return nil, fmt.Errorf("ordering: rocketmq admin: %w", err)
	}
	return adm, nil
}
