package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestEnqueueAgainAfterDrain: a file of 6 SMS with IDs, enqueued with
// `enqueue bulk` and drained by a worker, is refused line by line when
// enqueued again (each task is kept a day once it has run, its ID taken),
// and a worker started again sends nothing more. With --retention 0 the
// same file goes in again: nothing kept, each ID free once its task ran.
func TestEnqueueAgainAfterDrain(t *testing.T) {
	t.Parallel()
	url, rdb := redistest.URL(t), redistest.Client(t)
	enqueueBin := buildCLIs(t)
	queue, prefix := redistest.Queue(t, rdb), redistest.Prefix(t)
	sink := newSMSSink(t)
	policies := writePolicies(t, "tasks:\n  sms:send:\n    - { name: tenant, scope: tenant, limit: 20, window: 1s }\n")
	var lines []string
	for i := range 6 {
		lines = append(lines, fmt.Sprintf(`{"type": "sms", "tenant": "t%d", "to": "+15551234567", "body": "code %d", "id": "otp-%d"}`, i%2, i, i))
	}
	file := filepath.Join(t.TempDir(), "bulk.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bulk := func(more ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		args := append(append([]string{"bulk", "--redis", url, "--prefix", prefix, "--queue", queue}, more...), file)
		cmd := exec.CommandContext(ctx, enqueueBin, args...)
		cmd.Env = readmeEnv()
		out, _ := cmd.CombinedOutput() // exit 1 when a line is rejected
		return string(out)
	}
	drain := func(want int) {
		t.Helper()
		procs := startWorkers(t, 1, "--redis", url, "--policies", policies, "--sms-webhook", sink.srv.URL,
			"--queues", queue+"=1", "--prefix", prefix, "--log-level", "info")
		waitFor(t, 10*time.Second, "the worker's start", nil, func() bool {
			return strings.Contains(procs[0].logs.String(), `"msg":"worker started"`)
		})
		waitFor(t, 30*time.Second, fmt.Sprintf("%d SMS at the provider", want), sink.notified, func() bool { return len(sink.receipts()) >= want })
		waitDrained(t, rdb, queue, 30*time.Second)
		stopWorkers(t, procs...)
	}

	if out := bulk(); !strings.Contains(out, "enqueued 6 of 6") {
		t.Fatalf("the first enqueue: %s", out)
	}
	drain(6)
	out := bulk()
	if !strings.Contains(out, "enqueued 0 of 6 tasks; 6 rejected") || strings.Count(out, "is taken") != 6 {
		t.Errorf("the file again after the drain: %q, want 6 lines rejected, their IDs taken", out)
	}
	drain(6)
	if n := len(sink.receipts()); n != 6 {
		t.Errorf("the provider got %d SMS, want the 6 once", n)
	}

	if out := bulk("--retention", "0"); !strings.Contains(out, "enqueued 0 of 6") {
		t.Errorf("--retention 0 while the first run's tasks are kept: %q, want every ID still taken", out)
	}
	if err := rdb.Del(context.Background(), redistest.QueueKeys(t, rdb, queue)...).Err(); err != nil { // the kept tasks gone, as after their day
		t.Fatal(err)
	}
	if out := bulk("--retention", "0"); !strings.Contains(out, "enqueued 6 of 6") {
		t.Fatalf("the file once its tasks are gone: %q, want 6 enqueued", out)
	}
	drain(12)
	if out := bulk("--retention", "0"); !strings.Contains(out, "enqueued 6 of 6") {
		t.Errorf("--retention 0, the file again after its drain: %q, want 6 enqueued again (nothing kept)", out)
	}
}
