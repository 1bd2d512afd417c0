package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/worker"
)

// TestFrontOfQueue holds worker/front.go to the asynq it is built on: a
// scheduled task, and a pending one at the back, moved to the front of
// their queue are pending, and the next tasks an asynq server runs, ahead
// of those enqueued before them; a task that does not exist and one
// archived are told apart.
func TestFrontOfQueue(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q := redistest.Queue(t, rdb)
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	for _, id := range []string{"b1", "b2", "b3"} {
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue(q), asynq.TaskID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue(q), asynq.TaskID("late"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The scheduled task, then the last of the pending ones: each goes to
	// the front, the second ahead of the first.
	for _, c := range []struct {
		id   string
		want int64
	}{{"late", 1}, {"b3", 1}, {"none", 0}} {
		if got, err := worker.ToFront(ctx, rdb, q, c.id); err != nil || got != c.want {
			t.Errorf("ToFront(%s) = %d, %v; want %d", c.id, got, err, c.want)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	info, err := insp.GetTaskInfo(q, "late")
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("the moved task: %+v, %v; want pending", info, err)
	}
	ran := make(chan string, 4)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{q: 1}, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		ran <- id
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	var order []string
	for range 4 {
		select {
		case id := <-ran:
			order = append(order, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("ran %v, then nothing for 10 s", order)
		}
	}
	if want := []string{"b3", "late", "b1", "b2"}; !slices.Equal(order, want) {
		t.Errorf("asynq ran %v, want %v: the tasks moved to the front first, the last moved first", order, want)
	}
	if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue(q), asynq.TaskID("old"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := insp.ArchiveTask(q, "old"); err != nil {
		t.Fatal(err)
	}
	if got, err := worker.ToFront(ctx, rdb, q, "old"); err != nil || got != -2 {
		t.Errorf("ToFront of an archived task = %d, %v; want -2: it cannot run", got, err)
	}
}
