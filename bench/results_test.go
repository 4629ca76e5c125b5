package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWalletVsDTMIsTheWorstKindAgainstDTMsBest(t *testing.T) {
	t.Parallel()
	best := map[string]Phase{
		"deposit":  {Kind: "deposit", Clients: 32, SagasPerS: 900},
		"purchase": {Kind: "purchase", Clients: 128, SagasPerS: 600},
		"transfer": {Kind: "transfer", Clients: 8, SagasPerS: 1200},
	}
	m := &DTM{Version: dtmVersion, Phases: []DTMPhase{{Clients: 8, SagasPerS: 500}, {Clients: 32, SagasPerS: 800}, {Clients: 128, SagasPerS: 700}}}
	rt, ok := dtmRatio(best, m)
	require.True(t, ok)
	require.Equal(t, "wallet_vs_dtm", rt.Name)
	require.InDelta(t, 0.75, rt.Value, 1e-9) // purchase 600 ÷ DTM's 800
	require.Contains(t, rt.Definition, "32 clients: 800.0/s")
	require.Contains(t, rt.Definition, "the minimum is purchase")

	_, ok = dtmRatio(best, nil)
	require.False(t, ok)
	_, ok = dtmRatio(nil, m)
	require.False(t, ok)

	r := &Results{Phases: []Phase{best["deposit"], best["purchase"], best["transfer"]}, DTM: m,
		RawPG: []RawPG{{Clients: 8, TPS: 6000}}}
	r.finish()
	require.Equal(t, "wallet_vs_postgres", r.Ratios[0].Name)
	require.Equal(t, "wallet_vs_dtm", r.Ratios[1].Name)
	var target *Target
	for i := range r.Targets {
		if r.Targets[i].What == "ratio wallet_vs_dtm (min over kinds)" {
			target = &r.Targets[i]
		}
	}
	require.NotNil(t, target)
	require.Equal(t, "≥ 1.00", target.Want)
	require.False(t, target.Reached)
}
