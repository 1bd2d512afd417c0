package throttle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

const (
	processes        = 4
	perProcess       = 300
	processLimit     = 250
	hammerEnv        = "SLUICE_TEST_HAMMER"
	hammerRedisEnv   = "SLUICE_TEST_HAMMER_REDIS"
	hammerClusterEnv = "SLUICE_TEST_HAMMER_CLUSTER"
)

var processPolicy = throttle.PerMinute(processLimit)

// TestSeveralProcessesShareOneLimit starts separate processes that all ask
// for the same key at once: together they get exactly the limit.
func TestSeveralProcessesShareOneLimit(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			prefix := redistest.Prefix(t)
			env := []string{hammerEnv + "=" + prefix}
			if c, ok := b.rdb.(*redis.ClusterClient); ok {
				env = append(env, hammerClusterEnv+"="+strings.Join(c.Options().Addrs, ","))
			} else {
				env = append(env, hammerRedisEnv+"="+redistest.URL(t))
			}
			outs := make([]*strings.Builder, processes)
			cmds := make([]*exec.Cmd, processes)
			for i := range cmds {
				outs[i] = new(strings.Builder)
				cmds[i] = exec.Command(os.Args[0])
				cmds[i].Env = append(os.Environ(), env...)
				cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
				if err := cmds[i].Start(); err != nil {
					t.Fatal(err)
				}
				// After a failure below, the children are not waited for:
				// kill them rather than leave them behind.
				cmd := cmds[i]
				t.Cleanup(func() {
					if cmd.ProcessState == nil {
						_ = cmd.Process.Kill()
						_ = cmd.Wait()
					}
				})
			}
			// Release the processes together once all are connected.
			ready, start := prefix+"{hammer}ready", prefix+"{hammer}start"
			deadline := time.Now().Add(30 * time.Second)
			for b.rdb.Get(ctx, ready).Val() != strconv.Itoa(processes) {
				if time.Now().After(deadline) {
					t.Fatalf("processes not ready after 30 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			for range processes {
				b.rdb.RPush(ctx, start, "go")
			}
			total := 0
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("process %d: %v\n%s", i, err, outs[i])
				}
				var n int
				if _, err := fmt.Sscanf(outs[i].String(), "allowed %d", &n); err != nil {
					t.Fatalf("process %d output: %v\n%s", i, err, outs[i])
				}
				total += n
			}
			if total != processLimit {
				t.Errorf("%d processes allowed %d requests in all, want exactly %d", processes, total, processLimit)
			}
			b.rdb.Del(ctx, ready, start)
		})
	}
}

// hammer is the child process of TestSeveralProcessesShareOneLimit, run by
// TestMain instead of the tests: it waits for the start signal, makes
// perProcess requests, and prints how many were allowed.
func hammer(prefix string) error {
	ctx := context.Background()
	var rdb redis.UniversalClient
	if addrs := os.Getenv(hammerClusterEnv); addrs != "" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	} else {
		opt, err := redis.ParseURL(os.Getenv(hammerRedisEnv))
		if err != nil {
			return err
		}
		rdb = redis.NewClient(opt)
	}
	defer rdb.Close()
	l := throttle.NewLimiter(rdb, throttle.WithPrefix(prefix))
	if err := rdb.Incr(ctx, prefix+"{hammer}ready").Err(); err != nil {
		return err
	}
	if err := rdb.BLPop(ctx, 30*time.Second, prefix+"{hammer}start").Err(); err != nil {
		return err
	}
	allowed := 0
	for range perProcess {
		d, err := l.Allow(ctx, "shared", processPolicy)
		if err != nil {
			return err
		}
		if d.Allowed {
			allowed++
		}
	}
	fmt.Printf("allowed %d\n", allowed)
	return nil
}
