package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/keyspace"
)

// A change of layout (admin layout, docs/SCALING.md "Changing the
// layout"): the marker says "switching <from> to <to>" while the windows
// and lines move, so that no worker starts meanwhile, then names the new
// layout; the old layout joins the draining set, whose queues the workers
// still serve.

// ErrSwitching: Redis is changing its layout; no worker may start until
// the change is done. It matches ErrOther too.
var ErrSwitching = fmt.Errorf("%w: the layout is being changed (admin layout)", ErrOther)

// switchingPrefix starts the marker during a change.
const switchingPrefix = "switching "

// switchingMarker is the marker of a change from from to to.
func switchingMarker(from, to Layout) string {
	return switchingPrefix + from.String() + " to " + to.String()
}

// parseSwitching reads a marker that switchingMarker wrote.
func parseSwitching(s string) (from, to Layout, ok bool) {
	rest, ok := strings.CutPrefix(s, switchingPrefix)
	if !ok {
		return Layout{}, Layout{}, false
	}
	f, t, ok := strings.Cut(rest, " to ")
	if !ok {
		return Layout{}, Layout{}, false
	}
	var err error
	if f == Old.String() {
		from = Old
	} else if from, err = Parse(f); err != nil {
		return Layout{}, Layout{}, false
	}
	if to, err = Parse(t); err != nil {
		return Layout{}, Layout{}, false
	}
	return from, to, true
}

// Switching returns the change of layout under way under prefix; ok is
// false when none is.
func Switching(ctx context.Context, rdb redis.UniversalClient, prefix string) (from, to Layout, ok bool, err error) {
	v, err := rdb.Get(ctx, keyspace.LayoutKey(prefix)).Result()
	if errors.Is(err, redis.Nil) {
		return Layout{}, Layout{}, false, nil
	}
	if err != nil {
		return Layout{}, Layout{}, false, fmt.Errorf("read the layout %s: %w", keyspace.LayoutKey(prefix), err)
	}
	from, to, ok = parseSwitching(v)
	return from, to, ok, nil
}

// Begin marks the change from from to to under way: the marker must name
// from (none for Old), or this change already (a change resumed).
func Begin(ctx context.Context, rdb redis.UniversalClient, prefix string, from, to Layout) error {
	want := switchingMarker(from, to)
	return swap(ctx, rdb, prefix, func(got string, named bool) error {
		switch {
		case got == want, !named && from == Old, named && got == from.String():
			return nil
		case !named:
			return fmt.Errorf("%w: Redis names no layout, not %s", ErrOther, from)
		}
		return fmt.Errorf("%w: Redis holds layout %q, not %s", ErrOther, got, from)
	}, want, nil)
}

// Finish ends the change from from to to that Begin marked: the marker
// names to, and from joins the draining layouts (Old aside: every worker
// with a provider for each type serves its queue anyway).
func Finish(ctx context.Context, rdb redis.UniversalClient, prefix string, from, to Layout) error {
	want := switchingMarker(from, to)
	var drain *Layout
	if from != Old {
		drain = &from
	}
	return swap(ctx, rdb, prefix, func(got string, named bool) error {
		if got == to.String() || got == want {
			return nil
		}
		return fmt.Errorf("%w: Redis holds layout %q, not the change %q", ErrOther, got, want)
	}, to.String(), drain)
}

// swap sets the marker under prefix to value, and adds drain to the
// draining set unless nil, in one transaction, if check passes on what the
// marker holds (named is false when it holds nothing).
func swap(ctx context.Context, rdb redis.UniversalClient, prefix string, check func(got string, named bool) error, value string, drain *Layout) error {
	key, set := keyspace.LayoutKey(prefix), keyspace.DrainingKey(prefix)
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		got, err := tx.Get(ctx, key).Result()
		named := err == nil
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if err := check(got, named); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, value, 0)
			if drain != nil {
				p.SAdd(ctx, set, drain.String())
				p.SRem(ctx, set, value)
			}
			return nil
		})
		return err
	}, key)
	if err != nil {
		return fmt.Errorf("write the layout %s: %w", key, err)
	}
	return nil
}

// Draining returns the layouts whose queues the workers still serve after
// a change, in order of their shards.
func Draining(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]Layout, error) {
	key := keyspace.DrainingKey(prefix)
	vs, err := rdb.SMembers(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read the draining layouts %s: %w", key, err)
	}
	var out []Layout
	for _, v := range vs {
		l, err := Parse(v)
		if err != nil {
			return nil, fmt.Errorf("read the draining layouts %s: %w", key, err)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Layout) int { return a.Shards - b.Shards })
	return out, nil
}

// Forget removes l from the draining layouts: workers started after it no
// longer serve its queues.
func Forget(ctx context.Context, rdb redis.UniversalClient, prefix string, l Layout) error {
	key := keyspace.DrainingKey(prefix)
	if err := rdb.SRem(ctx, key, l.String()).Err(); err != nil {
		return fmt.Errorf("forget the draining layout %s in %s: %w", l, key, err)
	}
	return nil
}
