package ordering

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

func TestJavaStringHash(t *testing.T) {
	t.Parallel()
	// Values of "…".hashCode() in Java.
	for key, want := range map[string]int32{
		"":                    0,
		"1":                   49,
		"42":                  1662,
		"11111":               46760945,
		"hello":               99162322,
		"9223372036854775807": -1773151198,
		"用户":                  954895,
		"😀":                   1772899,
	} {
		require.Equal(t, want, JavaStringHash(key), "hash of %q", key)
	}
}

func TestKeyHashSlot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		hash KeyHash
		key  string
		n    int
		want int
	}{
		// On 8 queues Java's client puts user 1 on queue 1 and user 42 on queue 6; the Go
		// client's FNV selector puts them on 4 and 3.
		{HashJava, "1", 8, 1}, {HashJava, "42", 8, 6}, {HashFNV, "1", 8, 4}, {HashFNV, "42", 8, 3},
		// A negative hash: "9223372036854775807" hashes to -1773151198; Java takes
		// abs(-1773151198 % 8) = 6.
		{HashJava, "9223372036854775807", 8, 6},
		{HashJava, "anything", 1, 0}, {HashFNV, "anything", 1, 0},
	}
	for _, c := range cases {
		require.Equal(t, c.want, c.hash.Slot(c.key, c.n), "%s slot of %q among %d", c.hash, c.key, c.n)
	}
	h, err := ParseKeyHash("")
	require.NoError(t, err)
	require.Equal(t, HashJava, h, "java is the default")
	_, err = ParseKeyHash("crc32")
	require.Error(t, err)
}

func TestSelectorPicksOnTheJavaOrderedList(t *testing.T) {
	t.Parallel()
	var queues []*primitive.MessageQueue
	for _, b := range []string{"broker-b", "broker-a"} {
		for i := range 4 {
			queues = append(queues, &primitive.MessageQueue{Topic: "t", BrokerName: b, QueueId: i})
		}
	}
	rand.Shuffle(len(queues), func(i, j int) { queues[i], queues[j] = queues[j], queues[i] })
	sel := queueSelector{hash: HashJava}
	msg := primitive.NewMessage("t", nil)
	msg.WithShardingKey("42") // 1662 % 8 = 6: broker-b's queue 2 in Java's order
	got := sel.Select(msg, queues, "")
	require.Equal(t, "broker-b", got.BrokerName)
	require.Equal(t, 2, got.QueueId)

	route := Route{Queues: []Queue{{"broker-a", 0}, {"broker-a", 1}, {"broker-a", 2}, {"broker-a", 3}, {"broker-b", 0}, {"broker-b", 1}, {"broker-b", 2}, {"broker-b", 3}}, Hash: HashJava}
	require.Equal(t, Queue{"broker-b", 2}, route.QueueOf("42"), "QueueOf makes the selector's choice")

	// A message that names its queue goes there, or nowhere once the route lost it.
	named := primitive.NewMessage("t", nil)
	named.Queue = &primitive.MessageQueue{Topic: "t", BrokerName: "broker-a", QueueId: 3}
	require.Equal(t, 3, sel.Select(named, queues, "").QueueId)
	named.Queue.QueueId = 9
	require.Nil(t, sel.Select(named, queues, ""))

	// Java orders broker names by UTF-16 code units, Go's client by UTF-8 bytes: they differ
	// for characters beyond U+FFFF, which sort first in UTF-16.
	require.Negative(t, javaOrder(Queue{"b-😀", 0}, Queue{"b-Ａ", 0}))
	require.Positive(t, javaOrder(Queue{"b", 1}, Queue{"b", 0}))
}
