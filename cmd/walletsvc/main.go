// Command walletsvc serves the wallet REST API, runs the sagas and relays the outbox to
// RocketMQ.
//
//	walletsvc [serve] [flags]   the service (default)
//	walletsvc migrate [flags]   apply database migrations and exit
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/walletsaga/walletsaga/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], cli.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "walletsvc:", err)
		os.Exit(1)
	}
}
