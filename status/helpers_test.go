package status_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/provider"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// serverCheckInterval is the DelayedTaskCheckInterval of the test servers.
const serverCheckInterval = 100 * time.Millisecond

var goodSMS = producer.SMS{To: "+15551234567", Body: "Your code is 123456"}

// smsRecorder is an SMSProvider that passes each message to a channel.
type smsRecorder chan provider.Message[producer.SMS]

func (r smsRecorder) SendSMS(_ context.Context, m provider.Message[producer.SMS]) error {
	r <- m
	return nil
}
