package throttle_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
)

// TestResetLines: the lines of "sms" and "email" (see lineScene) each
// hold grants not claimed, waiting tasks and an entry at the entrance;
// sms's line of acme is a string and its class hash garbage. ResetLines("sms") removes
// exactly sms's keys, tasks, grants, places and entry, leaves email's as
// they were, and sms is served again after it.
func TestResetLines(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, l *throttle.Limiter, prefix string) {
		ctx := context.Background()
		s := newLineScene(t, rdb, l, prefix)
		ls := s.ls
		time.Sleep(s.window.Window) // room again: the next Dispatch gives grants
		turn, err := ls.Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(turn.Granted) == 0 {
			t.Fatalf("Dispatch gave no grant")
		}
		if err := ls.Enter(ctx, throttle.Entry{Class: "sms", Priority: 3, Tenant: "acme", Queue: "q", ID: "s9"},
			throttle.Entry{Class: "email", Priority: 3, Tenant: "initech", Queue: "q", ID: "e9"}); err != nil {
			t.Fatal(err)
		}
		if err := replaceWithString(ctx, rdb, s.keys.scan("qL:sms:3")); err != nil {
			t.Fatal(err)
		}
		if err := replaceWithString(ctx, rdb, s.keys.scan("q:sms")); err != nil {
			t.Fatal(err)
		}

		before := dumpKeys(t, rdb, prefix)
		found, err := ls.ClassLines(ctx, "sms")
		if err != nil {
			t.Fatal(err)
		}
		if got := dumpKeys(t, rdb, prefix); !cmp.Equal(got, before) {
			t.Fatalf("ClassLines changed Redis (-before +after):\n%s", cmp.Diff(before, got))
		}
		got, err := ls.ResetLines(ctx, "sms")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(found, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Refused" }, cmp.Ignore())); diff != "" {
			t.Errorf("ResetLines removed other than ClassLines found (-found +removed):\n%s", diff)
		}
		smsGrants := 0
		for _, g := range turn.Granted {
			if strings.HasPrefix(g.ID, "s") {
				smsGrants++
			}
		}
		if len(got.Granted) != smsGrants || got.Places != 2*smsGrants || len(got.Entering) != 1 || len(got.Waiting) == 0 {
			t.Errorf("ResetLines = %+v, want %d grants with 2 places each, an entry and tasks waiting", got, smsGrants)
		}

		// What is left: before, without anything of sms's lines.
		want := withoutSMSLines(before)
		after := dumpKeys(t, rdb, prefix)
		for key := range after {
			if strings.Contains(key, "}p:") {
				delete(after, key)
			}
		}
		if diff := cmp.Diff(want, after); diff != "" {
			t.Errorf("after ResetLines (-want +got):\n%s", diff)
		}

		// sms is served again: of three new tasks the last waits, and is
		// given its slot.
		for _, id := range []string{"s20", "s21", "s22"} {
			s.arrive("sms", "acme", id)
		}
		time.Sleep(s.window.Window)
		turn, err = ls.Dispatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(turn.Refused) > 0 || !slicesContainID(turn.Granted, "s22") {
			t.Errorf("Dispatch after the reset: granted %v, refused %q; want s22 granted, nothing refused", turn.Granted, turn.Refused)
		}
	})
}

// withoutSMSLines returns the keys of before, as dumpKeys gives them,
// less everything of sms's lines and the frontier notes, which may go.
func withoutSMSLines(before map[string]map[string]string) map[string]map[string]string {
	want := map[string]map[string]string{}
	for key, v := range before {
		tail := key[strings.Index(key, "}")+1:]
		if strings.HasPrefix(tail, "p:") || strings.Contains(tail, "sms") && strings.HasPrefix(tail, "q") {
			continue // a frontier note may go; sms's own keys must
		}
		kept := map[string]string{}
		for m, x := range v {
			switch {
			case tail == "qt" && strings.Contains(x, `"c":"sms"`),
				(tail == "qg" || strings.HasPrefix(tail, ":")) && strings.HasPrefix(strings.TrimPrefix(m, "@"), "s") && m != strings.TrimPrefix(m, "@") || tail == "qg" && strings.HasPrefix(m, "s"),
				tail == "qw" && m == "sms",
				tail == "qe" && strings.Contains(m, `"c":"sms"`):
				continue
			}
			kept[m] = x
		}
		if len(kept) > 0 || len(v) == 0 {
			want[key] = kept // Redis deletes a set or hash left empty
		}
	}
	return want
}

func slicesContainID(gs []throttle.Grant, id string) bool {
	for _, g := range gs {
		if g.ID == id {
			return true
		}
	}
	return false
}

// dumpKeys returns every key under prefix with what it holds: a sorted
// set's members and scores, a hash's fields, a list's values (counted), a
// string's value under "".
func dumpKeys(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]map[string]string{}
	for _, key := range rdbKeys(t, rdb, prefix) {
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		v := map[string]string{}
		switch typ {
		case "zset":
			zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, z := range zs {
				v[z.Member.(string)] = strconv.FormatFloat(z.Score, 'f', -1, 64)
			}
		case "hash":
			if v, err = rdb.HGetAll(ctx, key).Result(); err != nil {
				t.Fatal(err)
			}
		case "list":
			vals, err := rdb.LRange(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range vals {
				n, _ := strconv.Atoi(v[x])
				v[x] = strconv.Itoa(n + 1)
			}
		case "string":
			s, err := rdb.Get(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			v[""] = s
		}
		out[key] = v
	}
	return out
}
