// Command sink is a demo SMS provider for Docker Compose and the demo: it
// implements the webhook contract of the worker's --sms-webhook (POST
// {"id", "tenant", "to", "body"} as JSON, with Idempotency-Key set to the
// id), answers 200, and logs one line per message with how many arrived in
// the last window, so the logs show throttled delivery.
//
//	sink --window 1s
//	worker --sms-webhook http://127.0.0.1:8080/sms ...
//	curl 127.0.0.1:8080/report?window=1s
//
// GET /report gives, overall and per tenant, the messages received, the
// duplicates (ids that arrived again) and the most received in any span of
// the window: what a script needs to check that no limit was exceeded as
// the provider saw it. The sink keeps every receipt in memory until it
// stops: it is for demos and tests.
//
// It listens on loopback only by default (defaultAddr, 127.0.0.1:8080):
// in a container, where the workers reach it from other containers, it
// needs --addr 0.0.0.0:8080, as docker-compose.yml sets.
//
// Exit status: 0 when stopped by SIGINT or SIGTERM, 1 when it cannot
// listen or serve, 2 for a usage error (a bad flag, value or --addr, an
// argument: it takes none).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/sink"
)

const synopsis = `
usage: sink [--addr HOST:PORT] [--window DURATION] [--log-format text|json]

A demo SMS provider: POST /sms takes the worker's webhook requests and
answers 200; GET /report gives, overall and per tenant, the messages
received, the duplicates, and the most received in any span of --window
(or of ?window=500ms). It listens on loopback only, unless --addr says
otherwise (0.0.0.0:8080 to be reached from other hosts or containers).
Every flag can also be set from the environment variable shown.

Exit status: 0 when stopped by SIGINT or SIGTERM; 1 when it cannot listen
or serve; 2 for a usage error (a bad flag, value or --addr, an argument:
it takes none).`

// defaultAddr is where the sink listens without --addr: loopback only, so
// that a demo provider on a laptop is not open to its network.
const defaultAddr = "127.0.0.1:8080"

var env = map[string]string{
	"addr":       "SLUICE_SINK_ADDR",
	"window":     "SLUICE_SINK_WINDOW",
	"log-format": "SLUICE_SINK_LOG_FORMAT",
}

func main() {
	cli.Main(func(ctx context.Context, args []string) int { return run(ctx, args, os.Stderr) })
}

// run runs the sink with args, without the program name, logging to
// stderr, until ctx is done; it returns the exit status.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr, "listen on `host:port`; 0.0.0.0:PORT for every interface")
	window := fs.Duration("window", time.Second, "length of the spans counted in /report and in the log lines")
	logFormat := fs.String("log-format", "text", "log lines as text or json")
	fs.Usage = cli.Usage(fs, synopsis, env)
	if err := cli.Parse(fs, args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "sink:", err)
		return 2
	}
	if *window <= 0 {
		fmt.Fprintf(stderr, "sink: --window %v: must be positive\n", *window)
		return 2
	}
	var logger *slog.Logger
	switch *logFormat {
	case "text":
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	case "json":
		logger = slog.New(slog.NewJSONHandler(stderr, nil))
	default:
		fmt.Fprintf(stderr, "sink: --log-format %q: use text or json\n", *logFormat)
		return 2
	}

	if _, _, err := net.SplitHostPort(*addr); err != nil {
		reason := err.Error()
		if ae, ok := errors.AsType[*net.AddrError](err); ok {
			reason = ae.Err // without the address, which the line gives
		}
		fmt.Fprintf(stderr, "sink: --addr %q: %s: give host:port, such as %s\n", *addr, reason, defaultAddr)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "sink:", err)
		return 1
	}
	srv := &http.Server{Handler: sink.New(*window, logger).Handler(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("sink listening", "addr", ln.Addr().String(), "window", window.String(),
		"webhook", "POST /sms", "report", "GET /report")

	select {
	case err := <-served:
		fmt.Fprintln(stderr, "sink:", err)
		return 1
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		fmt.Fprintln(stderr, "sink: shutdown:", err)
		return 1
	}
	logger.Info("sink stopped")
	return 0
}
