package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/throttle/httplimit"
)

// Each API key may make 2 requests a minute; the third is refused. The
// example runs on a Redis-compatible server embedded in the process
// (miniredis), so that it runs anywhere; a program gives its own Redis.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()}) // your Redis
	defer rdb.Close()

	rules, err := httplimit.Limits(httplimit.Limit{Name: "per-key", Policy: throttle.PerMinute(2)})
	if err != nil {
		panic(err)
	}
	// API keys are secrets: keyed by their SHA-256, they never reach Redis.
	key := httplimit.Hashed(httplimit.Header("X-API-Key"))
	m, err := httplimit.New(throttle.NewLimiter(rdb), key, rules, nil)
	if err != nil {
		panic(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	srv := httptest.NewServer(m.Handler(api)) // or http.ListenAndServe(addr, m.Handler(api))
	defer srv.Close()

	for range 3 {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			panic(err)
		}
		req.Header.Set("X-API-Key", "sk_test_123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
		for _, h := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := resp.Header.Get(h); v != "" {
				fmt.Printf("  %s: %s\n", h, v)
			}
		}
	}
	// Output:
	// 200 OK
	//   RateLimit-Policy: "per-key";q=2;w=60
	//   RateLimit: "per-key";r=1;t=60
	// 200 OK
	//   RateLimit-Policy: "per-key";q=2;w=60
	//   RateLimit: "per-key";r=0;t=60
	// 429 Too Many Requests
	//   RateLimit-Policy: "per-key";q=2;w=60
	//   RateLimit: "per-key";r=0;t=60
	//   Retry-After: 60
}

// Behind a load balancer at 10.0.0.0/8, the client is the address the
// balancer appended to X-Forwarded-For, not what the client wrote there.
func ExampleClientIP() {
	key, err := httplimit.ClientIP(&httplimit.IPConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:41000"                          // the balancer
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 198.51.100.7") // forged, then real
	fmt.Println(key(r))

	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:41000" // not a proxy: the peer, by its /64
	fmt.Println(key(r))
	// Output:
	// 198.51.100.7 <nil>
	// 2001:db8:1:2::/64 <nil>
}
