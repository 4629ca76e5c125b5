package ordering

import "github.com/apache/rocketmq-client-go/v2/primitive"

// What the external tests (which need internal/rmqtest, itself importing this package)
// check of the unexported selector.

// NewQueueSelector is the producer's queue selector for hash.
func NewQueueSelector(hash KeyHash) interface {
	Select(*primitive.Message, []*primitive.MessageQueue, string) *primitive.MessageQueue
} {
	return queueSelector{hash: hash}
}

// InJavaOrder is inJavaOrder.
var InJavaOrder = inJavaOrder
