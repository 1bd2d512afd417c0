package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
)

// TestServesItsTypes: a worker with only an SMS provider serves the SMS
// queue alone, and leaves email and the 0.x queue default untouched; a
// worker with both serves the email queue and default too. Each runs as
// a user runs it, on a Redis of its own, since the type queues are shared
// names.
func TestServesItsTypes(t *testing.T) {
	t.Parallel()
	url := redistest.Own(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	// As the first worker of this version does: until then producers keep
	// to default, where older workers look.
	if err := rdb.Set(ctx, keyspace.LayoutKey(keyspace.DefaultPrefix), "shards=1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pc := producer.NewClientFromRedisClient(rdb)
	enqueue := func(id string, email bool, opts ...asynq.Option) {
		t.Helper()
		opts = append(opts, asynq.TaskID(id))
		var info *asynq.TaskInfo
		if email {
			info, err = pc.EnqueueEmail(ctx, "acme", producer.Email{To: "ada@example.com", Subject: "s", Body: "b"}, opts...)
		} else {
			info, err = pc.EnqueueSMS(ctx, "acme", producer.SMS{To: "+15551234567", Body: "b"}, opts...)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: producer.TypeSMS, true: producer.TypeEmail}[email]
		if len(opts) > 1 {
			want = layout.Legacy
		}
		if info.Queue != want {
			t.Fatalf("task %s went to queue %q, want %q", id, info.Queue, want)
		}
	}
	enqueue("sms-1", false)
	enqueue("email-1", true)
	enqueue("old-sms", false, asynq.Queue(layout.Legacy)) // as a 0.x producer put them
	enqueue("old-email", true, asynq.Queue(layout.Legacy))
	policies := filepath.Join("..", "..", "examples", "policies.yaml")

	queues, sent := serveUntil(t, []string{"--redis", url, "--policies", policies, "--sms-log"}, "sms-1")
	if queues != producer.TypeSMS {
		t.Errorf("the SMS-only worker served queues %q, want %q", queues, producer.TypeSMS)
	}
	ins := asynq.NewInspectorFromRedisClient(rdb)
	for q, id := range map[string]string{producer.TypeEmail: "email-1", layout.Legacy: "old-sms"} {
		if info, err := ins.GetTaskInfo(q, id); err != nil || info.State != asynq.TaskStatePending {
			t.Errorf("after the SMS-only worker, task %s in %s: %v, %v; want it pending", id, q, info, err)
		}
	}
	if len(sent) != 1 {
		t.Errorf("the SMS-only worker sent %v, want sms-1 alone", sent)
	}

	queues, sent = serveUntil(t, []string{"--redis", url, "--policies", policies, "--sms-log", "--email-log"}, "email-1", "old-sms", "old-email")
	if want := "default,email:send,sms:send"; queues != want {
		t.Errorf("the worker with both providers served queues %q, want %q", queues, want)
	}
	if len(sent) != 3 {
		t.Errorf("the worker with both providers sent %v, want email-1, old-sms and old-email once each", sent)
	}
	if got, _ := rdb.Get(ctx, keyspace.LayoutKey(keyspace.DefaultPrefix)).Result(); got != "shards=1" {
		t.Errorf("the layout marker holds %q, want shards=1", got)
	}
}

// serveUntil runs a worker with args until it has logged a send of every
// id in ids, then stops it, and returns the queues its first line names
// and the IDs it logged sends of, each once.
func serveUntil(t *testing.T, args []string, ids ...string) (queues string, sent []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(ctx, nil, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	scan := bufio.NewScanner(pipe)
	for len(want) > 0 && scan.Scan() {
		var l struct{ Msg, Queues, ID string }
		if err := json.Unmarshal(scan.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", scan.Text(), err)
		}
		switch l.Msg {
		case "worker started":
			queues = l.Queues
		case "sms", "email":
			sent = append(sent, l.ID)
			delete(want, l.ID)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(pipe)
	for _, line := range strings.Split(string(rest), "\n") {
		var l struct{ Msg, ID string }
		if json.Unmarshal([]byte(line), &l) == nil && (l.Msg == "sms" || l.Msg == "email") {
			sent = append(sent, l.ID)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker %q: %v", args, err)
	}
	if len(want) > 0 {
		t.Fatalf("worker %q stopped before sending %v (it sent %v)", args, want, sent)
	}
	return queues, sent
}

// TestRefusesAnotherLayout: a worker asked for a layout (--shards) other
// than the one Redis names does not start, and names both.
func TestRefusesAnotherLayout(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	if err := rdb.Set(context.Background(), keyspace.LayoutKey(prefix), "shards=3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := runWorker(t, "--redis", redistest.URL(t), "--prefix", prefix, "--policies", filepath.Join("..", "..", "examples", "policies.yaml"),
		"--sms-log", "--email-log", "--queues", redistest.Queue(t, rdb)+"=1", "--shards", "2")
	checkError(t, r, 1, "worker: another layout: Redis holds layout shards=3 ("+keyspace.LayoutKey(prefix)+"), and this process runs shards=2; ")
}

// TestStopsOnALayoutChange: a running worker (asynq has recorded it)
// stops, with an error naming it, once admin layout marks a change under
// way (layout.Begin), and a worker started during the change refuses to
// start.
func TestStopsOnALayoutChange(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	args := []string{"--redis", redistest.URL(t), "--prefix", prefix, "--policies", filepath.Join("..", "..", "examples", "policies.yaml"),
		"--sms-log", "--email-log", "--queues", redistest.Queue(t, rdb) + "=1"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := command(ctx, nil, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	var rest strings.Builder
	done := make(chan struct{})
	go func() {
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
		close(done)
	}()
	// Running: asynq has recorded it, after the worker read the layout.
	queue := args[len(args)-1][:strings.Index(args[len(args)-1], "=")]
	for running := false; !running; time.Sleep(20 * time.Millisecond) {
		servers, err := asynq.NewInspectorFromRedisClient(rdb).Servers()
		if err != nil || ctx.Err() != nil {
			t.Fatalf("waiting for the worker to run: %v, %v", err, ctx.Err())
		}
		for _, s := range servers {
			_, running = s.Queues[queue]
			if running {
				break
			}
		}
	}
	one, three := layout.Layout{Shards: 1}, layout.Layout{Shards: 3}
	if err := layout.Begin(ctx, rdb, prefix, one, three); err != nil {
		t.Fatal(err)
	}
	<-done
	err = cmd.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 || !strings.Contains(rest.String(), "the layout is being changed") ||
		!strings.Contains(rest.String(), "not the one this worker runs: stopping") {
		t.Errorf("a running worker, the change begun: %v, stderr after its start:\n%s\nwant exit status 1 naming the change", err, rest.String())
	}
	r := runWorker(t, args...)
	checkError(t, r, 1, "worker: another layout: the layout is being changed (admin layout): from shards=1 to shards=3")
}
