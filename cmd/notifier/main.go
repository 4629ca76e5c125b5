// Command notifier consumes wallet events in order and sends one SMS per balance change.
//
//	notifier [run] [flags]   the consumer and the SMS log API (default)
package main

import "github.com/walletsaga/walletsaga/internal/cli"

func main() { cli.Main("notifier", run) }
