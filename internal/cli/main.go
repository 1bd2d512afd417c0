package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Main runs a command's run with a context that SIGINT and SIGTERM
// cancel and the arguments after the program name, then exits with the
// status run returned. Every command's main is one call to it.
func Main(run func(ctx context.Context, args []string) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
