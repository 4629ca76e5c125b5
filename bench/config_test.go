package main

import (
	"io"
	"testing"

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
}
