package layout_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/layout"
)

// TestSlot: the slots Redis gives, from its documentation (CLUSTER KEYSLOT)
// and CRC16/XMODEM's check value.
func TestSlot(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]int{"somekey": 11058, "hash_tag": 2515, "123456789": 0x31C3 % layout.Slots, "": 0} {
		if got := layout.Slot(tag); got != want {
			t.Errorf("Slot(%q) = %d, want %d", tag, got, want)
		}
	}
}

// TestShardNames: every name's slot is in its shard's run of the slots, the
// names of a type are distinct, and a name is a queue name Sluice takes.
func TestShardNames(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{2, 3, 6, 12, 64} {
		for _, typ := range []string{"sms:send", "email:send"} {
			seen := map[string]bool{}
			for i := range shards {
				name := layout.ShardName(typ, i, shards)
				lo, hi := i*layout.Slots/shards, (i+1)*layout.Slots/shards
				if s := layout.Slot(name); s < lo || s >= hi {
					t.Errorf("ShardName(%s, %d, %d) = %s, slot %d, not in [%d, %d)", typ, i, shards, name, s, lo, hi)
				}
				if seen[name] || !strings.HasPrefix(name, fmt.Sprintf("%s.%d", typ, i)) {
					t.Errorf("ShardName(%s, %d, %d) = %s: taken, or not the type and shard", typ, i, shards, name)
				}
				seen[name] = true
			}
		}
	}
}

// TestShardSpread: 3,000 tenants over 3 shards are within 10% of the mean
// in each, and going to 4 shards moves about a quarter of them, each to the
// new shard.
func TestShardSpread(t *testing.T) {
	t.Parallel()
	three, four := layout.Layout{Shards: 3}, layout.Layout{Shards: 4}
	count := make([]int, 3)
	moved := 0
	for i := range 3000 {
		tenant := fmt.Sprintf("tenant-%d", i)
		s := three.Shard(tenant)
		count[s]++
		if s4 := four.Shard(tenant); s4 != s {
			moved++
			if s4 != 3 {
				t.Errorf("%s moved from shard %d to %d, not to the new shard 3", tenant, s, s4)
			}
		}
	}
	for s, n := range count {
		if n < 900 || n > 1100 {
			t.Errorf("shard %d holds %d of 3,000 tenants, want 1,000 ± 100", s, n)
		}
	}
	if moved < 650 || moved > 850 {
		t.Errorf("going to 4 shards moved %d of 3,000 tenants, want about 750", moved)
	}
	if got := layout.Default.Shard("anyone"); got != 0 {
		t.Errorf("one shard: Shard = %d, want 0", got)
	}
}
