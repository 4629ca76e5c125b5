package ordering

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"unicode/utf16"
)

// KeyHash names how a sharding key picks its queue among a topic's writable queues.
type KeyHash string

const (
	// HashJava is the Java client's SelectMessageQueueByHash with the key as a String (what
	// Spring's syncSendOrderly(topic, msg, hashKey) does): abs(key.hashCode() % n), with
	// Java's String.hashCode. Go and Java producers of one topic then put a key on the same
	// queue. The default.
	HashJava KeyHash = "java"
	// HashFNV is the Go client's NewHashQueueSelector: FNV-1a 32 of the key's bytes modulo n.
	// It agrees with no Java producer; kept for topics whose only producers are Go ones that
	// already use it.
	HashFNV KeyHash = "fnv"
)

// ParseKeyHash returns the KeyHash named s ("java" or "fnv"; "" is java).
func ParseKeyHash(s string) (KeyHash, error) {
	switch KeyHash(s) {
	case "", HashJava:
		return HashJava, nil
	case HashFNV:
		return HashFNV, nil
	}
	return "", fmt.Errorf("ordering: unknown key hash %q (java or fnv)", s)
}

// Slot is the index, in 0..n-1, of the queue that key goes to among n queues (n > 0), in
// the order Route.Queues lists them.
func (h KeyHash) Slot(key string, n int) int {
	if n <= 0 {
		return 0
	}
	if h == HashFNV {
		f := fnv.New32a()
		_, _ = f.Write([]byte(key))
		return int(f.Sum32() % uint32(n)) //nolint:gosec // G115: n is a queue count, far below 2^32
	}
	// Java: int value = hash % size; if (value < 0) value = Math.abs(value). Go's % truncates
	// toward zero like Java's, and |value| < n, so the negation cannot overflow.
	v := JavaStringHash(key) % int32(n) //nolint:gosec // G115: n is a queue count, far below 2^31
	if v < 0 {
		v = -v
	}
	return int(v)
}

// JavaStringHash is Java's String.hashCode of s: s[0]*31^(k-1) + … + s[k-1] over the
// string's UTF-16 code units, in int32 arithmetic (it wraps). A decimal user id is ASCII,
// one code unit per byte.
func JavaStringHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return javaHashUTF16(s)
		}
		h = 31*h + int32(c)
	}
	return h
}

func javaHashUTF16(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// Queue is one queue of a topic: a broker's queue id.
type Queue struct {
	Broker string
	ID     int
}

// String is "broker/id", as the notifier labels a delivery's queue.
func (q Queue) String() string { return q.Broker + "/" + strconv.Itoa(q.ID) }

// Route is a topic's writable queues as a producer selects among them: Queues in the Java
// client's order (its TopicPublishInfo: brokers by name, each broker's queues 0, 1, …), and
// the hash that picks a key's index in that list.
type Route struct {
	Queues []Queue
	Hash   KeyHash
}

// QueueOf is the queue key's messages go to on this route (the one SendOrderly picks); it
// panics on a route without queues.
func (r Route) QueueOf(key string) Queue { return r.Queues[r.Hash.Slot(key, len(r.Queues))] }

// Equal reports whether r and o select alike.
func (r Route) Equal(o Route) bool { return r.Hash == o.Hash && slices.Equal(r.Queues, o.Queues) }

// javaOrder compares two queues as the Java client orders its publish list: by broker name
// (Java's String.compareTo, over UTF-16 code units), then queue id. The Go client sorts the
// brokers by their UTF-8 bytes, which differs for names with characters beyond U+FFFF; the
// selectors sort with this, so both clients agree on every route.
func javaOrder(a, b Queue) int {
	if c := compareUTF16(a.Broker, b.Broker); c != 0 {
		return c
	}
	return a.ID - b.ID
}

func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
