package webhook

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DefaultAttemptTimeout bounds one attempt of the client [Egress.Client]
// makes, from dialing to the end of the response body, unless
// Egress.Timeout says otherwise: 15 seconds, the low end of what Standard
// Webhooks recommends (15 to 30) and what Svix gives its receivers. A
// receiver that needs longer should answer at once and work afterwards.
const DefaultAttemptTimeout = 15 * time.Second

// The client's connection limits: a receiver's connections are kept
// between attempts (keep-alive), a few per host, so that a steady flow of
// deliveries costs no new TLS handshake each.
const (
	dialTimeout         = 10 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
	idleConnTimeout     = 90 * time.Second
	maxIdleConns        = 256
	maxIdleConnsPerHost = 8
	maxResponseHeader   = 64 << 10
)

// Client returns a new HTTP client for deliveries under e, with a pool of
// connections of its own: make one per dispatcher and reuse it. Each
// request it sends:
//
//   - has its URL checked by the rules of [Egress.CheckURL] first (an
//     error wrapping [ErrInvalidURL]), so a URL saved under another
//     policy is not sent to;
//   - connects only to an address that passes, checked by the dialer's
//     Control hook on the very address being connected to, after the
//     name was resolved for this connection: private, loopback,
//     link-local, shared (CGNAT), multicast, documentation, unspecified,
//     NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4, Teredo and other
//     special-purpose ranges are refused, IPv4-mapped forms as their IPv4
//     address, as is a port other than 443, 80 with AllowHTTP, or one of
//     e.Ports (an error wrapping [ErrRefusedAddress]; with a name that
//     resolves to several addresses, only allowed ones are tried);
//   - goes direct: proxy settings of the environment (HTTPS_PROXY and
//     the like) are ignored, since Go runs a dialer's Control on the
//     proxy's address and never on the target's;
//   - is not redirected: a 3xx is returned as it came, for the caller to
//     count as a failed attempt (Standard Webhooks: update the URL
//     instead);
//   - uses TLS 1.2 or later (with e.RootCAs, or the system's roots) and
//     HTTP/2 where the receiver offers it;
//   - ends within e.Timeout (see [DefaultAttemptTimeout]), or sooner by
//     the request's context; it dials within 10 s and shakes hands within
//     10 s, and reads at most 64 KiB of response headers;
//   - asks for no compressed response (a receiver's answer is read only
//     for its status).
//
// Connections are kept alive between attempts, at most 8 idle ones per
// host and 256 in all, closed after 90 s idle, so a steady flow of
// deliveries to an endpoint reuses its connections. Call
// CloseIdleConnections on the client to let them go at once.
func (e Egress) Client() *http.Client {
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}
	d := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Resolver:  e.Resolver,
		Control:   e.control,
	}
	t := &http.Transport{
		Proxy:                  nil, // see above: a proxy would bypass Control
		DialContext:            d.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: e.RootCAs},
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
		MaxResponseHeaderBytes: maxResponseHeader,
		DisableCompression:     true,
	}
	return &http.Client{
		Transport: &guarded{egress: e, next: t},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Timeout: timeout,
	}
}

// guarded checks each request's URL before its transport sends it.
type guarded struct {
	egress Egress
	next   *http.Transport
}

func (g *guarded) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.egress.checkParsed(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	return g.next.RoundTrip(req)
}

// CloseIdleConnections closes the transport's idle connections, for
// http.Client.CloseIdleConnections.
func (g *guarded) CloseIdleConnections() { g.next.CloseIdleConnections() }

// control is the dialer's Control hook: it sees the address about to be
// connected to, after resolution, and refuses what e does not allow.
func (e Egress) control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("%w: network %s", ErrRefusedAddress, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: not an IP address and port", ErrRefusedAddress)
	}
	return e.checkAddrPort(ap)
}

// checkAddrPort refuses what control refuses, once address is parsed.
func (e Egress) checkAddrPort(ap netip.AddrPort) error {
	addr := ap.Addr().Unmap()
	if e.AllowLoopback && addr.IsLoopback() {
		return nil
	}
	if p := ap.Port(); !e.portAllowed("https", int(p)) && !(e.AllowHTTP && e.portAllowed("http", int(p))) {
		return fmt.Errorf("%w: port %d is not allowed", ErrRefusedAddress, p)
	}
	return e.checkAddr(addr)
}
