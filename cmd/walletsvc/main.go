// Command walletsvc serves the wallet REST API, runs the sagas and relays the outbox to
// RocketMQ.
//
//	walletsvc [serve] [flags]   the service (default)
//	walletsvc migrate [flags]   apply database migrations and exit
package main

import "github.com/walletsaga/walletsaga/internal/cli"

func main() { cli.Main("walletsvc", run) }
