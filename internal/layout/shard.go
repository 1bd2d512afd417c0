package layout

import (
	"hash/fnv"
	"strconv"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Shard returns tenant's shard, 0 to l.Shards − 1: a jump consistent hash
// (Lamping and Veach) of the tenant's FNV-1a 64 hash, so that going from S
// to S + 1 shards moves 1/(S + 1) of the tenants, the fewest any hash can.
func (l Layout) Shard(tenant string) int {
	if l.Shards <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(tenant))
	return jump(h.Sum64(), l.Shards)
}

// jump is the jump consistent hash of key over buckets.
func jump(key uint64, buckets int) int {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// ShardName is the name of shard i of taskType under a layout of shards
// shards (more than one): its asynq queue and its limiter group, so that
// both share one hash tag. It is "<taskType>.<i>" when that hash tag's
// slot is in range i, the i-th of shards equal runs of the slots, else
// "<taskType>.<i>.<n>" with the smallest n ≥ 1 whose slot is: a cluster
// whose masters hold equal runs of slots, as redis-cli --cluster create
// makes it, then holds shards ÷ masters shards of each type on each master.
func ShardName(taskType string, i, shards int) string {
	lo, hi := i*Slots/shards, (i+1)*Slots/shards
	name := taskType + "." + strconv.Itoa(i)
	for n := 1; ; n++ {
		if s := Slot(name); s >= lo && s < hi {
			return name
		}
		name = taskType + "." + strconv.Itoa(i) + "." + strconv.Itoa(n)
	}
}

// Slot is the Redis Cluster hash slot of a key whose hash tag is tag:
// CRC16 (XMODEM) of tag, modulo Slots.
func Slot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Slots
}
