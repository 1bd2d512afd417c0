package throttle

import "context"

// batcher sends concurrent decisions to Redis together (WithBatching).
// Placeholder: not built yet.
type batcher struct{}

func (b *batcher) eval(ctx context.Context, keys []string, args []any) ([]int64, error) {
	panic("throttle: batching is not built yet")
}
