package webhook_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/formsapi/formsapi/webhook"
	"github.com/matryer/is"
)

// refusedTargets are addresses no delivery may reach, each with why.
var refusedTargets = []struct{ addr, why string }{
	{"127.0.0.1", "loopback"},
	{"127.255.255.254", "loopback, the top of 127/8"},
	{"0.0.0.0", "unspecified (reaches the node itself on Linux)"},
	{"0.1.2.3", "this network"},
	{"10.0.0.1", "private"},
	{"172.16.0.1", "private"},
	{"172.31.255.254", "private, the top of 172.16/12"},
	{"192.168.1.1", "private"},
	{"169.254.169.254", "link-local: the cloud metadata service"},
	{"100.64.0.1", "shared address space (CGNAT)"},
	{"100.100.100.200", "shared address space: Alibaba's metadata service"},
	{"192.0.0.192", "IETF protocol assignments: Oracle's metadata service"},
	{"192.0.2.1", "documentation (TEST-NET-1)"},
	{"198.51.100.7", "documentation (TEST-NET-2)"},
	{"203.0.113.9", "documentation (TEST-NET-3)"},
	{"198.18.0.1", "benchmarking"},
	{"192.88.99.1", "6to4 relay anycast"},
	{"224.0.0.1", "multicast"},
	{"239.255.255.250", "multicast (SSDP)"},
	{"240.0.0.1", "reserved"},
	{"255.255.255.255", "broadcast"},
	{"168.63.129.16", "Azure's WireServer, a public address refused by name"},
	{"::1", "IPv6 loopback"},
	{"::", "IPv6 unspecified"},
	{"::ffff:127.0.0.1", "IPv4-mapped loopback"},
	{"::ffff:169.254.169.254", "IPv4-mapped metadata service"},
	{"::ffff:10.0.0.1", "IPv4-mapped private"},
	{"::127.0.0.1", "IPv4-compatible loopback (deprecated form)"},
	{"fe80::1", "IPv6 link-local"},
	{"fec0::1", "IPv6 site-local (deprecated)"},
	{"fc00::1", "unique local"},
	{"fd00:ec2::254", "unique local: AWS's IPv6 metadata service"},
	{"ff02::1", "IPv6 multicast, all nodes"},
	{"ff05::1:3", "IPv6 multicast, site-local DHCP"},
	{"64:ff9b::7f00:1", "NAT64 of 127.0.0.1"},
	{"64:ff9b::a9fe:a9fe", "NAT64 of 169.254.169.254"},
	{"64:ff9b:1::a00:1", "local-use NAT64 of 10.0.0.1"},
	{"2002:7f00:1::1", "6to4 of 127.0.0.1"},
	{"2002:a9fe:a9fe::1", "6to4 of 169.254.169.254"},
	{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
	{"2001:db8::1", "IPv6 documentation"},
	{"3fff::1", "IPv6 documentation (RFC 9637)"},
	{"100::1", "IPv6 discard-only"},
	{"5f00::1", "SRv6 SIDs"},
}

// TestRefusedAtDial: for each refused address, a host name that resolves
// to it passes CheckURL (it is a fine name), and the client still refuses
// to connect, from the Control hook that sees the resolved address: the
// error wraps ErrRefusedAddress, which only that hook returns.
func TestRefusedAtDial(t *testing.T) {
	t.Parallel()
	names := map[string][]string{}
	for i, target := range refusedTargets {
		names[fmt.Sprintf("target-%d.example.com", i)] = []string{target.addr}
	}
	names["both.example.com"] = []string{"10.1.1.1", "fd12::1"}
	dns := staticDNS(names)
	for _, e := range []webhook.Egress{
		{Resolver: dns.Resolver()},
		{Resolver: dns.Resolver(), AllowHTTP: true, Ports: []uint16{8443}},
	} {
		client := e.Client()
		for i, target := range refusedTargets {
			for _, scheme := range []string{"https", "http"} {
				if scheme == "http" && !e.AllowHTTP {
					continue
				}
				raw := fmt.Sprintf("%s://target-%d.example.com/hook", scheme, i)
				if _, err := e.CheckURL(raw); err != nil {
					t.Fatalf("%s: CheckURL: %v", raw, err)
				}
				res, err := client.Post(raw, "application/json", strings.NewReader(`{}`))
				if err == nil {
					res.Body.Close()
					t.Errorf("%s (%s, %s): connected", raw, target.addr, target.why)
					continue
				}
				if !errors.Is(err, webhook.ErrRefusedAddress) {
					t.Errorf("%s (%s, %s): %v, want ErrRefusedAddress", raw, target.addr, target.why, err)
				}
			}
		}
		_, err := client.Get("https://both.example.com/")
		is.New(t).True(errors.Is(err, webhook.ErrRefusedAddress)) // an A and an AAAA, both refused
	}
	is.New(t).True(len(refusedTargets) >= 25)
}

// flipDNS answers name with public to the first lookup (its A and AAAA
// questions) and with private to every later one: DNS rebinding. Each
// address goes in the record of its kind, an IPv4-mapped one in AAAA.
func flipDNS(name string, public, private netip.Addr) *fakeDNS {
	var asked atomic.Int32
	return newFakeDNS(func(n string, aaaa bool) []netip.Addr {
		if n != name {
			return nil
		}
		a := private
		if asked.Add(1) <= 2 {
			a = public
		}
		if a.Is4() == aaaa {
			return nil
		}
		return []netip.Addr{a}
	})
}

// TestRebindingBetweenCheckAndDial: the name resolves to a public address
// when the endpoint is checked and to a private one when the client
// connects; the connection is refused.
func TestRebindingBetweenCheckAndDial(t *testing.T) {
	t.Parallel()
	for _, private := range []string{"127.0.0.1", "169.254.169.254", "10.0.0.5", "::ffff:192.168.0.1"} {
		is := is.New(t)
		dns := flipDNS("rebind.example.com", netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr(private))
		e := webhook.Egress{Resolver: dns.Resolver()}
		u, err := e.CheckURL("https://rebind.example.com/hook")
		is.NoErr(err)
		is.NoErr(e.CheckDNS(t.Context(), u)) // public when saved
		_, err = e.Client().Get(u.String())
		if !errors.Is(err, webhook.ErrRefusedAddress) {
			t.Errorf("%s: %v, want ErrRefusedAddress", private, err) // private when sent: refused
		}
		is.True(dns.questions("rebind.example.com") > 2) // asked again for the dial
	}
}

// TestProxyFromEnvironmentIgnored: with every proxy variable pointing at
// a proxy the client could reach, a request to a name of a private
// address is still refused, and the proxy never hears of it. A client
// that used the proxy would connect to the proxy's address, the only one
// its Control hook would see, and the proxy would fetch the private URL.
func TestProxyFromEnvironmentIgnored(t *testing.T) {
	var hits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer proxy.Close()
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(v, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	dns := staticDNS(map[string][]string{"victim.example.com": {"10.0.0.1"}})
	// Loopback allowed, so the proxy (on loopback) would be reachable.
	e := webhook.Egress{AllowHTTP: true, AllowLoopback: true, Resolver: dns.Resolver()}
	is := is.New(t)
	for _, raw := range []string{"http://victim.example.com/", "https://victim.example.com/"} {
		_, err := e.Client().Get(raw)
		is.True(errors.Is(err, webhook.ErrRefusedAddress)) // refused
	}
	is.Equal(hits.Load(), int32(0)) // the proxy was never asked

	// The control: a transport that does use the proxy hands it the
	// request, past a Control hook that refuses 10.0.0.1.
	d := &net.Dialer{Resolver: dns.Resolver(), Control: func(_, address string, _ syscall.RawConn) error {
		if strings.HasPrefix(address, "10.") {
			return errors.New("refused")
		}
		return nil
	}}
	proxyURL, _ := url.Parse(proxy.URL)
	proxied := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DialContext: d.DialContext}}
	res, err := proxied.Get("http://victim.example.com/")
	is.NoErr(err)
	res.Body.Close()
	is.Equal(hits.Load(), int32(1)) // through the proxy
}

// TestLoopbackAllowance: a loopback receiver is reached only by a client
// whose Egress allows it; it is a field of the value, nothing global.
func TestLoopbackAllowance(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	_, err := webhook.Egress{}.Client().Post(srv.URL, "application/json", strings.NewReader("{}"))
	is.True(errors.Is(err, webhook.ErrInvalidURL)) // http refused
	_, err = webhook.Egress{AllowHTTP: true}.Client().Post(srv.URL, "application/json", strings.NewReader("{}"))
	is.True(errors.Is(err, webhook.ErrRefusedAddress)) // loopback refused
	is.Equal(hits.Load(), int32(0))

	allowed := webhook.Egress{AllowHTTP: true, AllowLoopback: true}
	res, err := allowed.Client().Post(srv.URL, "application/json", strings.NewReader("{}"))
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusNoContent) // reached
	is.Equal(hits.Load(), int32(1))

	// A name that resolves to loopback, with the allowance (and the port,
	// which a name does not get for free): reached too.
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	allowed.Ports = []uint16{portOf(t, port)}
	allowed.Resolver = staticDNS(map[string][]string{"receiver.example.com": {"127.0.0.1"}}).Resolver()
	res, err = allowed.Client().Get("http://receiver.example.com:" + port + "/")
	is.NoErr(err)
	res.Body.Close()
	is.Equal(hits.Load(), int32(2))
	// Without it, refused at the dial.
	_, err = webhook.Egress{AllowHTTP: true, Ports: []uint16{portOf(t, port)}, Resolver: allowed.Resolver}.Client().Get("http://receiver.example.com:" + port + "/")
	is.True(errors.Is(err, webhook.ErrRefusedAddress))
	is.Equal(hits.Load(), int32(2))
}

func portOf(t *testing.T, s string) uint16 {
	var p uint16
	if _, err := fmt.Sscan(s, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTLS: https to a receiver whose CA the Egress trusts works; one the
// client does not trust, or one that offers only TLS 1.1, fails.
func TestTLS(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	e := webhook.Egress{AllowLoopback: true, RootCAs: pool}
	res, err := e.Client().Get(srv.URL)
	is.NoErr(err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusOK)
	is.Equal(string(body), "HTTP/2.0") // HTTP/2 where offered

	_, err = webhook.Egress{AllowLoopback: true}.Client().Get(srv.URL)
	var unknown x509.UnknownAuthorityError
	is.True(errors.As(err, &unknown)) // the system roots do not know it

	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	old.TLS = &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	old.StartTLS()
	defer old.Close()
	pool.AddCert(old.Certificate())
	_, err = e.Client().Get(old.URL)
	is.True(err != nil) // TLS 1.1 only: refused
	is.True(strings.Contains(err.Error(), "protocol version"))
}

// TestNoRedirect: a 3xx comes back as it is; its Location is not visited.
func TestNoRedirect(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var visited atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { visited.Add(1) }))
	defer target.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/elsewhere", code)
		}))
		res, err := webhook.Egress{AllowHTTP: true, AllowLoopback: true}.Client().Post(srv.URL, "application/json", strings.NewReader("{}"))
		is.NoErr(err)
		res.Body.Close()
		srv.Close()
		is.Equal(res.StatusCode, code) // the 3xx itself
	}
	is.Equal(visited.Load(), int32(0)) // never followed
}

// TestKeepAlive: attempts to one receiver share a connection.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var mu sync.Mutex
	remotes := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		remotes[r.RemoteAddr]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	client := webhook.Egress{AllowHTTP: true, AllowLoopback: true}.Client()
	for range 10 {
		res, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"a":1}`))
		is.NoErr(err)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	is.Equal(len(remotes), 1) // one connection for ten attempts
	client.CloseIdleConnections()
}

// TestAttemptTimeout: a receiver that never answers ends the attempt with
// a timeout error (the bound itself is Egress.Timeout; no clock is read).
func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	defer close(release)
	_, err := webhook.Egress{AllowHTTP: true, AllowLoopback: true, Timeout: 50 * time.Millisecond}.Client().Get(srv.URL)
	var ne net.Error
	is.True(errors.As(err, &ne) && ne.Timeout()) // timed out
}
