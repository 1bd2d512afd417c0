package httplimit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/throttle/httplimit"
)

type netipPrefix = netip.Prefix

func mustPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// cut shortens s for a test message.
func cut(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// TestClientIP: the key is the peer's address, or its IPv6 network, or
// behind trusted proxies the client X-Forwarded-For names; nothing the
// client writes is trusted.
func TestClientIP(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{mustPrefix(t, "10.0.0.0/8"), mustPrefix(t, "2001:db8:ffff::/48")}
	cases := []struct {
		name    string
		cfg     *httplimit.IPConfig
		remote  string
		xff     []string // X-Forwarded-For lines
		want    string
		wantBad bool // ErrBadKey
		wantErr bool // another error
	}{
		{"IPv4 peer", nil, "203.0.113.7:51000", nil, "203.0.113.7", false, false},
		{"IPv6 peer: its /64", nil, "[2001:db8:1:2:3:4:5:6]:51000", nil, "2001:db8:1:2::/64", false, false},
		{"IPv6 peer, /128", &httplimit.IPConfig{IPv6Prefix: 128}, "[2001:db8:1:2:3:4:5:6]:51000", nil, "2001:db8:1:2:3:4:5:6", false, false},
		{"IPv6 peer, /48", &httplimit.IPConfig{IPv6Prefix: 48}, "[2001:db8:1:2:3:4:5:6]:51000", nil, "2001:db8:1::/48", false, false},
		{"IPv4 mapped in IPv6", nil, "[::ffff:203.0.113.7]:51000", nil, "203.0.113.7", false, false},
		{"zone dropped", &httplimit.IPConfig{IPv6Prefix: 128}, "[fe80::1%eth0]:51000", nil, "fe80::1", false, false},
		{"no proxies: X-Forwarded-For ignored", nil, "203.0.113.7:51000", []string{"198.51.100.1"}, "203.0.113.7", false, false},
		{"untrusted peer: X-Forwarded-For ignored", &httplimit.IPConfig{TrustedProxies: proxies}, "203.0.113.7:51000", []string{"198.51.100.1"}, "203.0.113.7", false, false},
		{"trusted peer: the client it names", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"198.51.100.1"}, "198.51.100.1", false, false},
		{"a forged entry left of the client", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"1.2.3.4, 198.51.100.1, 10.0.0.1"}, "198.51.100.1", false, false},
		{"forged trusted entries left of the client", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"10.9.9.9, 198.51.100.1, 10.0.0.1"}, "198.51.100.1", false, false},
		{"garbage left of the client", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"<script>, 198.51.100.1"}, "198.51.100.1", false, false},
		{"several lines, in order", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"1.2.3.4", "198.51.100.1", "10.0.0.1"}, "198.51.100.1", false, false},
		{"entries with ports", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"198.51.100.1:4711, [2001:db8:ffff::1]:80"}, "198.51.100.1", false, false},
		{"IPv6 client behind proxies", &httplimit.IPConfig{TrustedProxies: proxies}, "[2001:db8:ffff::2]:80", []string{"2001:db8:7:8::9"}, "2001:db8:7:8::/64", false, false},
		{"all trusted: the leftmost", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"10.0.0.5, 10.0.0.1"}, "10.0.0.5", false, false},
		{"trusted peer, no header: the peer", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", nil, "10.0.0.2", false, false},
		{"empty entries skipped", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"198.51.100.1,, ,"}, "198.51.100.1", false, false},
		{"garbage where the client should be", &httplimit.IPConfig{TrustedProxies: proxies}, "10.0.0.2:80", []string{"unknown, 10.0.0.1"}, "", true, false},
		{"peer not an IP (a Unix socket)", nil, "@", nil, "", false, true},
		{"trusted proxies given IPv4-mapped", &httplimit.IPConfig{TrustedProxies: []netip.Prefix{mustPrefix(t, "::ffff:10.0.0.0/104")}}, "10.0.0.2:80", []string{"198.51.100.1"}, "198.51.100.1", false, false},
		{"a mapped peer of an IPv4 proxy", &httplimit.IPConfig{TrustedProxies: proxies}, "[::ffff:10.0.0.2]:80", []string{"198.51.100.1"}, "198.51.100.1", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kf, err := httplimit.ClientIP(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, err := kf(r)
			switch {
			case tc.wantBad:
				if !errors.Is(err, httplimit.ErrBadKey) {
					t.Errorf("key %q, err %v; want ErrBadKey", got, err)
				}
			case tc.wantErr:
				if err == nil || errors.Is(err, httplimit.ErrBadKey) {
					t.Errorf("key %q, err %v; want a server error", got, err)
				}
			case err != nil || got != tc.want:
				t.Errorf("key %q, err %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestClientIPConfig: a bad configuration is an error.
func TestClientIPConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     httplimit.IPConfig
		wantErr string
	}{
		{"prefix 129", httplimit.IPConfig{IPv6Prefix: 129}, "httplimit: IPv6Prefix 129 is not 1 to 128"},
		{"prefix -1", httplimit.IPConfig{IPv6Prefix: -1}, "httplimit: IPv6Prefix -1 is not 1 to 128"},
		{"zero network", httplimit.IPConfig{TrustedProxies: []netip.Prefix{{}}}, "httplimit: trusted proxy 0 (invalid Prefix) is not a valid network"},
		{"mapped, wider than IPv4", httplimit.IPConfig{TrustedProxies: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("::ffff:10.0.0.0"), 80)}},
			"httplimit: trusted proxy 0 (::ffff:10.0.0.0/80) spans more than IPv4-mapped addresses; give its IPv4 network"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kf, err := httplimit.ClientIP(&tc.cfg)
			if err == nil || err.Error() != tc.wantErr || kf != nil {
				t.Errorf("ClientIP: %v; want %q", err, tc.wantErr)
			}
		})
	}
}

// TestHashed: Hashed keys by the SHA-256 of the key, so that an API key
// never reaches Redis; errors pass through.
func TestHashed(t *testing.T) {
	t.Parallel()
	kf := httplimit.Hashed(httplimit.Header("X-API-Key"))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", "sk_live_secret")
	got, err := kf(r)
	if err != nil || got != sha256Hex("sk_live_secret") || strings.Contains(got, "secret") {
		t.Errorf("Hashed: %q, %v; want the hex SHA-256", got, err)
	}
	r.Header.Del("X-API-Key")
	if got, err := kf(r); !errors.Is(err, httplimit.ErrBadKey) || got != "" {
		t.Errorf("Hashed without the header: %q, %v; want ErrBadKey", got, err)
	}
}
