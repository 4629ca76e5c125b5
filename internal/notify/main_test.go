package notify_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The RocketMQ client (through ordering's types) starts a cache janitor at init, for the
// process's life.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}
