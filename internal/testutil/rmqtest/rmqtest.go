// Package rmqtest helps integration tests use the real RocketMQ broker started by
// `make services`: it checks the name server and broker are reachable (failing under CI,
// skipping otherwise), hands out the credentials of the stack's RocketMQ users, creates
// uniquely named topics and verifies the broker really has them, and reads back a
// dead-letter queue.
package rmqtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
)

// Broker is the stack a test runs against.
type Broker struct {
	Namesrv    string
	BrokerAddr string
	Cluster    string
	// Credentials are the stack's RocketMQ admin user: tests create topics and groups of
	// their own, which only the admin may use (the product's users may use only the
	// product's topic and groups).
	Credentials ordering.Credentials
}

// Users are the RocketMQ users scripts/services.sh creates on the dev broker, with their
// documented dev secrets (see docs/DEVELOPING.md), each overridable by the variable services.sh
// reads too: RMQ_ADMIN_USER / RMQ_ADMIN_SECRET, RMQ_WALLET_USER / RMQ_WALLET_SECRET,
// RMQ_NOTIFIER_USER / RMQ_NOTIFIER_SECRET.
type Users struct {
	Admin    ordering.Credentials // super user: everything
	Wallet   ordering.Credentials // publishes to wallet-events only
	Notifier ordering.Credentials // consumes wallet-events as wallet-notifier, owns its DLQ
}

// DevUsers returns the dev stack's users.
func DevUsers() Users {
	get := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	return Users{
		Admin:    ordering.Credentials{AccessKey: get("RMQ_ADMIN_USER", "walletsaga-admin"), SecretKey: get("RMQ_ADMIN_SECRET", "walletsaga-dev-admin-secret")},
		Wallet:   ordering.Credentials{AccessKey: get("RMQ_WALLET_USER", "walletsvc"), SecretKey: get("RMQ_WALLET_SECRET", "walletsaga-dev-walletsvc-secret")},
		Notifier: ordering.Credentials{AccessKey: get("RMQ_NOTIFIER_USER", "notifier"), SecretKey: get("RMQ_NOTIFIER_SECRET", "walletsaga-dev-notifier-secret")},
	}
}

// Require returns the broker of the dev stack, or fails/skips the test (see testenv).
func Require(t testing.TB) Broker {
	t.Helper()
	testenv.SkipIfShort(t, "RocketMQ")
	b := Broker{Namesrv: testenv.Namesrv(), BrokerAddr: os.Getenv("ROCKETMQ_BROKER_ADDR"), Cluster: "DefaultCluster", Credentials: DevUsers().Admin}
	if b.BrokerAddr == "" {
		b.BrokerAddr = "127.0.0.1:10911"
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	for _, addr := range []string{b.Namesrv, b.BrokerAddr} {
		c, err := dialer.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			testenv.Unavailable(t, "RocketMQ", addr, err)
			return b
		}
		_ = c.Close()
	}
	return b
}

// Unique returns prefix plus a random suffix, for topics and groups that no other test or
// earlier run has used.
func Unique(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

var adminMu sync.Mutex

// CreateTopic creates topic with the given number of read/write queues (as the admin user)
// and waits until the name server routes it with that many queues.
func (b Broker) CreateTopic(t testing.TB, topic string, queues int) {
	t.Helper()
	adminMu.Lock()
	defer adminMu.Unlock()
	adm, err := ordering.NewAdmin([]string{b.Namesrv}, b.Credentials)
	if err != nil {
		t.Fatalf("rmqtest: %v", err)
	}
	defer adm.Close() //nolint:errcheck // a client of the test's own; a failed close changes nothing it checks
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(b.BrokerAddr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues)); err != nil {
		t.Fatalf("rmqtest: create topic %s: %v", topic, err)
	}
	var last error
	for ctx.Err() == nil {
		mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
		if err == nil && len(mqs) == queues {
			return
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("rmqtest: topic %s not routed with %d queues within 30s (last error: %v)", topic, queues, last)
}

// DLQMessage is one message read back from a dead-letter queue.
type DLQMessage struct {
	MsgID, OriginMsgID, Keys, Topic string
	Body                            []byte
}

// ReadDLQ subscribes to %DLQ%<group> with a throwaway group from the first offset and
// returns the messages seen until want of them matched (or timeout).
func (b Broker) ReadDLQ(t testing.TB, group string, timeout time.Duration, want func([]DLQMessage) bool) []DLQMessage {
	t.Helper()
	var (
		mu  sync.Mutex
		got []DLQMessage
	)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer([]string{b.Namesrv}),
		consumer.WithGroupName(Unique("dlq-reader")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithCredentials(primitive.Credentials{AccessKey: b.Credentials.AccessKey, SecretKey: b.Credentials.SecretKey}),
	)
	if err != nil {
		t.Fatalf("rmqtest: dlq consumer: %v", err)
	}
	dlq := "%DLQ%" + group
	err = c.Subscribe(dlq, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, DLQMessage{MsgID: m.MsgId, OriginMsgID: m.GetProperty("ORIGIN_MESSAGE_ID"), Keys: m.GetKeys(), Topic: m.GetProperty("RETRY_TOPIC"), Body: m.Body})
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatalf("rmqtest: subscribe %s: %v", dlq, err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("rmqtest: start dlq consumer: %v", err)
	}
	defer c.Shutdown() //nolint:errcheck // a client of the test's own; a failed shutdown changes nothing it checks
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := want(got)
		snapshot := append([]DLQMessage(nil), got...)
		mu.Unlock()
		if done {
			return snapshot
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]DLQMessage(nil), got...)
}

// HasKey reports whether keys (space-separated, as the client joins them) holds k.
func HasKey(keys, k string) bool {
	for _, f := range strings.Fields(keys) {
		if f == k {
			return true
		}
	}
	return false
}

// NotifierUser creates a RocketMQ user with the rights the notifier's user has
// (scripts/services.sh notifier-user: the same rules), on topic and group instead of the
// product's, and returns its credentials: a test of what the notifier may do that does not
// touch the product's topic and group.
func (b Broker) NotifierUser(t testing.TB, topic, group string) ordering.Credentials {
	t.Helper()
	adminMu.Lock()
	defer adminMu.Unlock()
	creds := ordering.Credentials{AccessKey: Unique("it-notifier"), SecretKey: Unique("it-secret")}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "services.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", script, "notifier-user", creds.AccessKey, creds.SecretKey, topic, group).CombinedOutput() //nolint:gosec // G204: the repository's own script, with names this function made
	if err != nil {
		t.Fatalf("rmqtest: services.sh notifier-user: %v\n%s", err, out)
	}
	return creds
}

// ResetOffsets moves consumer group back on topic to the first message each queue stored at
// or after at (scripts/services.sh reset-offsets: mqadmin resetOffsetByTime, the step
// docs/OPERATIONS.md gives after a restore of the notifier's database).
func (b Broker) ResetOffsets(t testing.TB, group, topic string, at time.Time) {
	t.Helper()
	adminMu.Lock()
	defer adminMu.Unlock()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "services.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms := strconv.FormatInt(at.UnixMilli(), 10)
	out, err := exec.CommandContext(ctx, "bash", script, "reset-offsets", group, topic, ms).CombinedOutput() //nolint:gosec // G204: the repository's own script, with names of the test's own
	if err != nil {
		t.Fatalf("rmqtest: services.sh reset-offsets: %v\n%s", err, out)
	}
	t.Logf("reset-offsets %s %s %s:\n%s", group, topic, ms, out)
}
