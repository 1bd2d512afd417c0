package throttle_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/throttle"
)

func TestQuote(t *testing.T) {
	t.Parallel()
	a63 := strings.Repeat("a", 63)
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", `""`},
		{"short, escaped as by %q", "sms:\"acme\"\n", `"sms:\"acme\"\n"`},
		{"64 bytes kept whole", a63 + "b", `"` + a63 + `b"`},
		{"65 bytes cut at 64", a63 + "bc", `"` + a63 + `b"... (65 bytes)`},
		{"a 2-byte character across the cut is dropped whole", a63 + "é", `"` + a63 + `"... (65 bytes)`},
		{"a 4-byte character across the cut is dropped whole", strings.Repeat("a", 61) + "😀", `"` + strings.Repeat("a", 61) + `"... (65 bytes)`},
		{"bytes that start no character back off at most 3", strings.Repeat("\x80", 100), `"` + strings.Repeat(`\x80`, 60) + `"... (100 bytes)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got, want := throttle.Quote(tc.in), tc.want; got != want {
				t.Errorf("Quote(%q) = %s, want %s", tc.in, got, want)
			}
		})
	}
}
