package layout_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/keyspace"
	"github.com/sluicehq/sluice/internal/layout"
	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestParse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"shards=1", "shards=3", "shards=64"} {
		l, err := layout.Parse(s)
		if err != nil || l.String() != s {
			t.Errorf("Parse(%q) = %v, %v; want it back", s, l, err)
		}
	}
	for _, s := range []string{"", "shards=0", "shards=-1", "shards=01", "shards=1.5", "shards= 1", "shard=1", "shards=99999999999999999999"} {
		if l, err := layout.Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, l)
		} else if !strings.Contains(err.Error(), "shards=<N>") {
			t.Errorf("Parse(%q): %v, want it to say what a layout is", s, err)
		}
	}
}

func TestQueues(t *testing.T) {
	t.Parallel()
	all := []string{"email:send", "sms:send"}
	cases := []struct {
		served []string
		want   []string
	}{
		{all, []string{"email:send", "sms:send", layout.Legacy}},
		{[]string{"sms:send"}, []string{"sms:send"}},
		{[]string{"email:send"}, []string{"email:send"}},
	}
	for _, c := range cases {
		if got := layout.Default.Queues(c.served, all); !slices.Equal(got, c.want) {
			t.Errorf("Queues(%v) = %v, want %v", c.served, got, c.want)
		}
	}
	if got := layout.Old.Queues(all, all); !slices.Equal(got, []string{layout.Legacy}) {
		t.Errorf("Old.Queues = %v, want default alone", got)
	}
	if got := layout.Default.Queue("sms:send", "acme"); got != "sms:send" {
		t.Errorf("Queue(sms:send, acme) = %q, want the type's queue", got)
	}
}

// TestEnsure writes the layout into a Redis that names none, keeps it, and
// refuses another, naming both, without changing what Redis holds.
func TestEnsure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	if _, ok, err := layout.Read(ctx, rdb, prefix); ok || err != nil {
		t.Fatalf("Read of a new prefix: ok %v, %v; want none", ok, err)
	}
	if err := layout.Check(ctx, rdb, prefix, layout.Default); err != nil {
		t.Fatalf("Check with no layout: %v", err)
	}
	if err := layout.Ensure(ctx, rdb, prefix, layout.Default); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if got, _ := rdb.Get(ctx, keyspace.LayoutKey(prefix)).Result(); got != "shards=1" {
		t.Fatalf("the marker holds %q, want shards=1", got)
	}
	if err := layout.Ensure(ctx, rdb, prefix, layout.Default); err != nil {
		t.Fatalf("Ensure again: %v", err)
	}
	err := layout.Ensure(ctx, rdb, prefix, layout.Layout{Shards: 3})
	if !errors.Is(err, layout.ErrOther) || !strings.Contains(err.Error(), "shards=1") || !strings.Contains(err.Error(), "shards=3") {
		t.Fatalf("Ensure(shards=3) over shards=1: %v; want ErrOther naming both", err)
	}
	if got, _ := rdb.Get(ctx, keyspace.LayoutKey(prefix)).Result(); got != "shards=1" {
		t.Fatalf("after a refused Ensure the marker holds %q, want shards=1", got)
	}
	rdb.Set(ctx, keyspace.LayoutKey(prefix), "shards=two", 0)
	if err := layout.Check(ctx, rdb, prefix, layout.Default); err == nil || !strings.Contains(err.Error(), `"shards=two"`) {
		t.Fatalf("Check of a damaged marker: %v; want it named", err)
	}
}
