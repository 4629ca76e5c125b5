package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPartsRunInTheOrderTheirNamesList(t *testing.T) {
	t.Parallel()
	var names []string
	for _, p := range (&bench{}).parts() {
		names = append(names, p.name)
	}
	require.Equal(t, partNames, names)
}

func TestParseConfigSelectsPartsAndRefusesUnknownOnes(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	c, err := parseConfig([]string{"-parts", "mq, notify"}, none, io.Discard)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"mq": true, "notify": true}, c.Parts)

	_, err = parseConfig([]string{"-parts", "product,nope"}, none, io.Discard)
	require.ErrorContains(t, err, `unknown part "nope"`)

	_, err = parseConfig([]string{"-parts", "notify"}, none, io.Discard)
	require.ErrorContains(t, err, "add mq")

	_, err = parseConfig([]string{"-clients", "8,0"}, none, io.Discard)
	require.ErrorContains(t, err, "-clients")

	c, err = parseConfig([]string{"-half-rate", "450"}, none, io.Discard)
	require.NoError(t, err)
	require.InDelta(t, 450, c.HalfRate, 0.001)
	_, err = parseConfig([]string{"-half-rate", "-1"}, none, io.Discard)
	require.ErrorContains(t, err, "-half-rate")
}

func TestParseConfigReadsTheDurablePhasesGroupCommit(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	c, err := parseConfig(nil, none, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{0, 500 * time.Microsecond}, c.CommitDelays)
	require.Equal(t, 5, c.CommitSiblings)

	c, err = parseConfig([]string{"-durable-commit-delays", "1ms", "-commit-siblings", "2"}, none, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{time.Millisecond}, c.CommitDelays)
	require.Equal(t, 2, c.CommitSiblings)

	for _, bad := range []string{"-1us", "101ms", "1ns", "soon"} {
		_, err = parseConfig([]string{"-durable-commit-delays", "0," + bad}, none, io.Discard)
		require.ErrorContains(t, err, "-durable-commit-delays", bad)
	}
	_, err = parseConfig([]string{"-commit-siblings", "1001"}, none, io.Discard)
	require.ErrorContains(t, err, "-commit-siblings")
}

func TestGroupCommitSetsAndResetsTheClustersDurability(t *testing.T) {
	t.Parallel()
	off := groupCommit{Siblings: 5}
	require.Equal(t, "durable", off.name())
	on := groupCommit{Delay: 500 * time.Microsecond, Siblings: 5}
	require.Equal(t, "durable, commit_delay 500µs (siblings 5)", on.name())
	require.Equal(t, []string{`ALTER SYSTEM SET fsync = on`, `ALTER SYSTEM SET synchronous_commit = on`,
		`ALTER SYSTEM SET commit_delay = 500`, `ALTER SYSTEM SET commit_siblings = 5`, `SELECT pg_reload_conf()`}, on.statements(true))
	require.Equal(t, []string{`ALTER SYSTEM RESET fsync`, `ALTER SYSTEM RESET synchronous_commit`,
		`ALTER SYSTEM RESET commit_delay`, `ALTER SYSTEM RESET commit_siblings`, `SELECT pg_reload_conf()`}, on.statements(false))
	require.Equal(t, "durable_commit_delay_500us_siblings_5", ratioSuffix(on.name()))
}

// TestTheLanesRunAtTheHalfLoad: the lane runs' rate is the half load's, and without one,
// half the best deposit rate of the default closed-loop phases; a faster deposit phase of
// another setting (the retention part's, pruning off) does not raise it.
func TestTheLanesRunAtTheHalfLoad(t *testing.T) {
	phases := []Phase{
		{Kind: "deposit", Clients: 128, SagasPerS: 1400},
		{Kind: "purchase", Clients: 128, SagasPerS: 1600},
		{Kind: "deposit", Clients: 128, SagasPerS: 1700, Setting: "pruning off"},
	}
	b := &bench{cfg: config{LaneRate: 100}, res: &Results{Phases: phases}}
	require.InDelta(t, 700, b.laneRate(), 0.001, "half the best default deposit phase")
	b.res.HalfLoad = &Phase{Kind: "deposit", OpenRate: 690, SagasPerS: 689}
	require.InDelta(t, 690, b.laneRate(), 0.001, "the half load's own rate")
	b.res = &Results{}
	require.InDelta(t, 100, b.laneRate(), 0.001, "no product phase: the configured rate")
}
