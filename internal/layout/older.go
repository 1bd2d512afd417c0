package layout

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// ErrOlder is returned, wrapped, when an asynq server that is no worker
// of this version serves a queue a worker would: a worker of Sluice
// 0.1.0, whose fair lines this version does not read (docs/SCALING.md,
// "From 0.1.0").
var ErrOlder = errors.New("an older worker serves these queues")

// PresenceID returns a new worker's presence id: its host and process, as
// asynq registers its server, and a random part.
func PresenceID() string {
	return fmt.Sprintf("%s/%d/%s", host(), os.Getpid(), rand.Text())
}

// host is the host name asynq gives its servers.
func host() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown-host"
	}
	return h
}

// CheckOlder returns an error wrapping ErrOlder, naming each, when an
// asynq server serves one of queues from a process in which no worker is
// present under prefix (Present, with a PresenceID).
func CheckOlder(ctx context.Context, rdb redis.UniversalClient, prefix string, queues []string) error {
	present, err := Running(ctx, rdb, prefix)
	if err != nil {
		return err
	}
	ours := map[string]bool{}
	for _, id := range present {
		if i := strings.LastIndexByte(id, '/'); i > 0 {
			ours[id[:i]] = true
		}
	}
	servers, err := asynq.NewInspectorFromRedisClient(rdb).Servers()
	if err != nil {
		return fmt.Errorf("look for older workers: %w", err)
	}
	var older []string
	for _, s := range servers {
		if ours[s.Host+"/"+strconv.Itoa(s.PID)] {
			continue
		}
		var shared []string
		for q := range s.Queues {
			if slices.Contains(queues, q) {
				shared = append(shared, q)
			}
		}
		if len(shared) > 0 {
			slices.Sort(shared)
			older = append(older, fmt.Sprintf("host %s pid %d serving %s since %s",
				s.Host, s.PID, strings.Join(shared, ","), s.Started.UTC().Format("15:04:05")))
		}
	}
	if len(older) > 0 {
		slices.Sort(older)
		return fmt.Errorf("%w (%s): stop the workers of Sluice 0.1.0 before starting this version (docs/SCALING.md, \"From 0.1.0\")",
			ErrOlder, strings.Join(older, "; "))
	}
	return nil
}
