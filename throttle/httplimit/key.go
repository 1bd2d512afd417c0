package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice/throttle"
)

// ErrBadKey is wrapped by the error of a KeyFunc when the request carries no
// usable key: a missing or empty header, an address that is not one. The
// middleware answers such requests 400, and any other KeyFunc error 500.
var ErrBadKey = errors.New("no usable key")

// KeyFunc names who a request counts against: a tenant, an API key, a
// client address. Any non-empty string is a key: the limiter encodes keys
// so that none can pass for another or leave its Redis prefix, and stores
// a key longer than throttle.MaxRawKeyLen bytes as its SHA-256.
//
// An error wrapping ErrBadKey, or an empty key, means the request has no
// usable key: the client's fault, answered 400. Any other error means the
// KeyFunc failed (a tenant lookup that could not be made), answered 500.
// A KeyFunc is called once per request, and must be safe for concurrent
// use.
type KeyFunc func(r *http.Request) (string, error)

// Header returns a KeyFunc that keys a request by the value of its header
// name (X-API-Key, X-Tenant): a request without it, with it empty, or with
// it more than once, has no usable key. The value is used as it is; wrap
// the KeyFunc in Hashed when it is a secret.
func Header(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		vs := r.Header.Values(name)
		switch {
		case len(vs) == 0:
			return "", fmt.Errorf("%w: the request has no %s header", ErrBadKey, name)
		case len(vs) > 1:
			return "", fmt.Errorf("%w: the request has %d %s headers; send one", ErrBadKey, len(vs), name)
		case vs[0] == "":
			return "", fmt.Errorf("%w: the %s header is empty", ErrBadKey, name)
		}
		return vs[0], nil
	}
}

// Hashed returns a KeyFunc that keys a request by the hex SHA-256 of kf's
// key, for keys that are secrets, such as API keys: the limiter writes its
// keys into Redis key names, where SCAN, MONITOR and the slow log show
// them. Errors and empty keys of kf pass through. A nil kf gives a KeyFunc
// that fails every request with a server error (500) saying so.
func Hashed(kf KeyFunc) KeyFunc {
	if kf == nil {
		return func(*http.Request) (string, error) {
			return "", errors.New("httplimit: Hashed(nil)")
		}
	}
	return func(r *http.Request) (string, error) {
		key, err := kf(r)
		if err != nil || key == "" {
			return key, err
		}
		sum := sha256.Sum256([]byte(key))
		return hex.EncodeToString(sum[:]), nil
	}
}

// DefaultIPv6Prefix is IPConfig.IPv6Prefix's default: a client that has
// an IPv6 network of its own usually has a /64, and can pick any address
// in it.
const DefaultIPv6Prefix = 64

// IPConfig configures ClientIP. The zero value keys by the address of the
// connection's peer.
type IPConfig struct {
	// TrustedProxies are the networks of the reverse proxies in front of
	// the server. When the connection's peer is in one of them, the client
	// is the rightmost address of X-Forwarded-For (all its header lines, in
	// order) that is not in one of them: every address to its right was
	// written by a trusted proxy, every address to its left by someone the
	// client could be. When every address is trusted the client is the
	// leftmost. None, the default, ignores X-Forwarded-For: any client can
	// write it. Only list proxies that append their peer's address to it.
	TrustedProxies []netip.Prefix

	// IPv6Prefix is how many leading bits of an IPv6 address are the key:
	// 1 to 128, default DefaultIPv6Prefix (64). 128 keys each address on
	// its own. IPv4 addresses, and IPv4 mapped into IPv6, are keyed whole.
	IPv6Prefix int
}

// ClientIP returns a KeyFunc that keys a request by its client's IP
// address: the connection's peer (http.Request.RemoteAddr), or, behind
// the proxies of cfg.TrustedProxies, the client that X-Forwarded-For names.
// The key is the address ("203.0.113.7") or its IPv6 network
// ("2001:db8:1:2::/64"), zone dropped. A nil cfg takes every default. It
// fails for a prefix length outside 1 to 128 or an invalid network.
//
// A RemoteAddr that is not an IP address (a Unix socket) is a server
// error (500); an X-Forwarded-For entry that is not an IP address where
// the client's should be makes the request's key unusable (400).
func ClientIP(cfg *IPConfig) (KeyFunc, error) {
	var c IPConfig
	if cfg != nil {
		c = *cfg
	}
	if c.IPv6Prefix == 0 {
		c.IPv6Prefix = DefaultIPv6Prefix
	}
	if c.IPv6Prefix < 1 || c.IPv6Prefix > 128 {
		return nil, fmt.Errorf("httplimit: IPv6Prefix %d is not 1 to 128", c.IPv6Prefix)
	}
	trusted := make([]netip.Prefix, len(c.TrustedProxies))
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("httplimit: trusted proxy %d (%v) is not a valid network", i, p)
		}
		if a := p.Addr(); a.Is4In6() {
			// Addresses are compared unmapped: ::ffff:10.0.0.0/104 is
			// 10.0.0.0/8.
			if p.Bits() < 96 {
				return nil, fmt.Errorf("httplimit: trusted proxy %d (%v) spans more than IPv4-mapped addresses; give its IPv4 network", i, p)
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		trusted[i] = p.Masked()
	}
	bits := c.IPv6Prefix
	return func(r *http.Request) (string, error) {
		peer, ok := parseIP(r.RemoteAddr)
		if !ok {
			return "", fmt.Errorf("httplimit: the connection's remote address %s is not an IP address", throttle.Quote(r.RemoteAddr))
		}
		client, err := forwardedClient(peer, r.Header.Values("X-Forwarded-For"), trusted)
		if err != nil {
			return "", err
		}
		if client.Is4() || bits == 128 {
			return client.String(), nil
		}
		return netip.PrefixFrom(client, bits).Masked().String(), nil
	}, nil
}

// forwardedClient returns the client behind peer: peer itself unless peer
// is trusted, else the rightmost untrusted address of the X-Forwarded-For
// lines xff, or their leftmost address when all are trusted.
func forwardedClient(peer netip.Addr, xff []string, trusted []netip.Prefix) (netip.Addr, error) {
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for line != "" {
			if !isTrusted(client, trusted) {
				return client, nil
			}
			var entry string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				line, entry = line[:j], line[j+1:]
			} else {
				line, entry = "", line
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			a, ok := parseIP(entry)
			if !ok {
				return netip.Addr{}, fmt.Errorf("%w: X-Forwarded-For names %s where a client address should be", ErrBadKey, throttle.Quote(entry))
			}
			client = a
		}
	}
	return client, nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseIP reads "192.0.2.1", "2001:db8::1", "[2001:db8::1]:443" or
// "192.0.2.1:443", dropping any IPv6 zone and unmapping IPv4 in IPv6.
func parseIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.WithZone("").Unmap(), true
}
