package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestOpsIdleConnectionClosed: the operations server closes a keep-alive
// connection left idle for opsIdleTimeout.
func TestOpsIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := command(ctx, nil, "--redis", redistest.URL(t), "--policies", "../../examples/policies.yaml",
		"--sms-log", "--email-log", "--queues", redistest.Queue(t, redistest.Client(t))+"=1", "--metrics-addr", "127.0.0.1:0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		go func() { _, _ = io.Copy(io.Discard, pipe) }()
		_ = cmd.Wait()
	})
	var addr string
	for scan := bufio.NewScanner(pipe); addr == "" && scan.Scan(); {
		var l struct{ Msg, Addr string }
		if json.Unmarshal(scan.Bytes(), &l) == nil && l.Msg == "operations server listening" {
			addr = l.Addr
		}
	}
	if addr == "" {
		t.Fatal("the worker never said where its operations server listens")
	}

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the connection at once; want it kept alive until idle")
	}

	// Idle now: the server must close the connection within its timeout.
	start := time.Now()
	if err := conn.SetReadDeadline(start.Add(opsIdleTimeout + 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection after %v: read %v, want EOF (closed by the server)", time.Since(start).Round(time.Second), err)
	}
	if took := time.Since(start); took < opsIdleTimeout-time.Second {
		t.Errorf("closed after %v, before the idle timeout %v", took, opsIdleTimeout)
	}
}
