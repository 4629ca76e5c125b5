package main

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every fault a plan draws, on one broker or a cluster, has an action that carries it out,
// and the ones that act on the brokers or the topic take their turn: restarts, crashes,
// joins, reshards and freezes of a broker, not a broker's kill, which needs no broker up.
func TestEveryPlannedFaultHasAnAction(t *testing.T) {
	t.Parallel()
	brokerOps := []FaultKind{RestartBroker, CrashBroker, JoinBroker, Reshard, FreezeBroker}
	planned := map[FaultKind]bool{}
	for _, brokers := range []int{1, 2} {
		o := testPlan
		o.Brokers, o.Upgrade = brokers, true
		for seed := int64(1); seed <= 20; seed++ {
			for _, f := range Plan(seed, o) {
				planned[f.Kind] = true
			}
		}
	}
	require.Len(t, planned, len(faultActions), "a kind of fault no plan draws, or one without an action")
	for kind := range planned {
		a, ok := faultActions[kind]
		require.True(t, ok, "%s has no action", kind)
		require.NotNil(t, a.inject, "%s carries nothing out", kind)
		require.Equal(t, slices.Contains(brokerOps, kind), a.brokerOp, "%s: one broker operation at a time", kind)
	}
}
