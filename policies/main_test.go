package policies_test

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestMain stops the Redis containers that the usage tests start.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
