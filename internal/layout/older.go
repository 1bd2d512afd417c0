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
// "From 0.1.0"), or another application's.
var ErrOlder = errors.New("an asynq server that is no worker of this version (one of Sluice 0.1.0, or another application's) serves these queues")

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
// present under prefix (Present, with a PresenceID). The workers present
// are read before and after the servers: a worker says it runs before
// its server starts and stops saying so after its server stops, so one
// of the two reads sees it.
func CheckOlder(ctx context.Context, rdb redis.UniversalClient, prefix string, queues []string) error {
	ours := map[string]bool{}
	readPresent := func() error {
		present, err := Running(ctx, rdb, prefix)
		for _, id := range present {
			if i := strings.LastIndexByte(id, '/'); i > 0 {
				ours[id[:i]] = true
			}
		}
		return err
	}
	if err := readPresent(); err != nil {
		return err
	}
	servers, err := asynq.NewInspectorFromRedisClient(rdb).Servers()
	if err != nil {
		return fmt.Errorf("look for older workers: %w", err)
	}
	if err := readPresent(); err != nil {
		return err
	}
	servers = slices.DeleteFunc(servers, func(s *asynq.ServerInfo) bool { return ours[s.Host+"/"+strconv.Itoa(s.PID)] })
	if older := Serving(servers, queues); len(older) > 0 {
		return fmt.Errorf("%w: %s", ErrOlder, strings.Join(older, "; "))
	}
	return nil
}

// Serving describes each of servers that serves one of queues, "host H
// pid P serving Q1,Q2 since 15:04:05" (the queues it shares with
// queues), sorted.
func Serving(servers []*asynq.ServerInfo, queues []string) []string {
	var out []string
	for _, s := range servers {
		var shared []string
		for q := range s.Queues {
			if slices.Contains(queues, q) {
				shared = append(shared, q)
			}
		}
		if len(shared) > 0 {
			slices.Sort(shared)
			out = append(out, fmt.Sprintf("host %s pid %d serving %s since %s",
				s.Host, s.PID, strings.Join(shared, ","), s.Started.UTC().Format("15:04:05")))
		}
	}
	slices.Sort(out)
	return out
}
