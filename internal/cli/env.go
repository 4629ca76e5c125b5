// The process's environment as run takes it, and comma-separated lists.

package cli

import (
	"os"
	"strings"
)

// SplitList splits a comma-separated list, trimming blanks.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Getenv is os.Getenv, for main functions to pass to run.
var Getenv = os.Getenv
