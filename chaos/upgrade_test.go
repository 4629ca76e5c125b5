package main

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The upgrade is in every plan that asks for it, on one broker and on a cluster, once, after
// the run's first twentieth and over by 85% of it, clear of the broker's freeze, and of the
// notifier's in every cluster plan and nine one-broker plans in ten; the rest of each seed's
// plan is the plan without it.
func TestEveryPlanUpgradesOnceClearOfTheFreezes(t *testing.T) {
	t.Parallel()
	for _, brokers := range []int{1, 2} {
		o := testPlan
		o.Brokers, o.Replicas = brokers, map[int]int{1: 2, 2: 3}[brokers]
		with := o
		with.Upgrade = true
		duringNotifierFreeze := 0
		for seed := int64(1); seed <= 200; seed++ {
			plan := Plan(seed, with)
			var upgrades []Fault
			for _, f := range plan {
				if f.Kind == Upgrade {
					upgrades = append(upgrades, f)
				}
			}
			require.Len(t, upgrades, 1, "seed %d, %d brokers", seed, brokers)
			u := upgrades[0]
			require.Equal(t, upgradeLasts(o.Replicas), u.Down)
			require.GreaterOrEqual(t, u.At, o.Duration/20, "seed %d: %s", seed, u)
			require.LessOrEqual(t, u.At+u.Down, o.Duration*85/100, "seed %d: %s", seed, u)
			for _, f := range plan {
				overlaps := footprint(f).overlaps(span{u.At, u.At + u.Down})
				switch f.Kind {
				case FreezeBroker:
					require.False(t, overlaps, "seed %d: %s during %s", seed, f, u)
				case FreezeNotifier:
					if overlaps {
						duringNotifierFreeze++
					}
				}
			}
			requireApart(t, seed, plan, with)
			rest := slices.DeleteFunc(slices.Clone(plan), func(f Fault) bool { return f.Kind == Upgrade })
			without := Plan(seed, o)
			for i := range rest {
				rest[i].Planned, without[i].Planned = 0, 0
			}
			require.Equal(t, without, rest, "seed %d: the rest of the plan is the plan without the upgrade", seed)
		}
		require.LessOrEqual(t, duringNotifierFreeze, map[int]int{1: 20, 2: 0}[brokers], "%d brokers", brokers)
	}
}

// The upgrade takes three steps per replica (each walletsvc and notifier replaced, each
// walletsvc restarted), and fits a cluster's run between its broker's freeze and its
// notifier's.
func TestTheUpgradeFitsTheRun(t *testing.T) {
	t.Parallel()
	require.Equal(t, 6*(upgradeDwell+upgradeStep)+upgradeProbing, upgradeLasts(2))
	require.Equal(t, 9*(upgradeDwell+upgradeStep)+upgradeProbing, upgradeLasts(3))
	require.Less(t, upgradeLasts(3), 2*time.Minute+20*time.Second)
}
