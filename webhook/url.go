package webhook

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"code.dny.dev/ssrf"
)

// Egress is the policy of where deliveries may go, checked when an
// endpoint's URL is saved ([Egress.CheckURL], and [Egress.CheckDNS] for
// early feedback) and again on every attempt by the client it makes
// ([Egress.Client]). The zero value is the production policy: https on
// port 443, to a host name or a public IP address, with every address a
// name resolves to checked when the connection is made. Each relaxation
// is a field the host sets on the value it passes; nothing in the
// process, no variable of the environment, turns one on.
//
// An Egress is a value: copy it freely; it is safe for concurrent use as
// long as its fields (and the Resolver and RootCAs they point to) are not
// changed.
type Egress struct {
	// AllowHTTP permits plain http URLs, on port 80 (or one of Ports).
	// A delivery over http can be read and held back by anyone on the
	// path, though not changed unnoticed: keep it to tests and to
	// receivers on the host's own network.
	AllowHTTP bool
	// AllowLoopback permits loopback receivers, for tests with an
	// httptest.Server: the host names localhost and *.localhost, the IP
	// literals 127.0.0.0/8 and ::1, on any port, and a connection to a
	// loopback address whatever name resolved to it. Never set it in
	// production: it lets a customer's URL reach services on the node
	// itself. Everything else stays refused.
	AllowLoopback bool
	// Ports are further ports an endpoint URL may name, besides 443 for
	// https and 80 for http (when AllowHTTP is set), for receivers that
	// listen elsewhere (such as 8443). Each is allowed for both schemes.
	Ports []uint16
	// Resolver resolves endpoint host names, for the client and for
	// CheckDNS; nil means net.DefaultResolver. Whatever it answers, every
	// address is checked as the connection is made.
	Resolver *net.Resolver
	// RootCAs are the certificate authorities the client trusts; nil
	// means the system's. A test sets its httptest TLS server's.
	RootCAs *x509.CertPool
	// Timeout bounds each attempt of the client, from dialing to the end
	// of the response body; zero or less means DefaultAttemptTimeout. A
	// dispatcher that sets a shorter deadline on the request's context
	// gets that.
	Timeout time.Duration
}

// MaxURLLength bounds an endpoint URL, in bytes: 2,048, which every
// receiver's URL fits and which keeps the stored URL and its checks
// small.
const MaxURLLength = 2048

// ErrInvalidURL is wrapped by the error [Egress.CheckURL] returns for a
// URL an endpoint may not have, and by the client's error for a request
// to one. The error names the rule broken and never quotes the URL, which
// may carry a receiver's token in its path or query.
var ErrInvalidURL = errors.New("webhook: invalid endpoint URL")

// ErrRefusedAddress is wrapped by the error of a connection the client
// refused to make (and of [Egress.CheckDNS], and of [Egress.CheckURL] for
// an IP literal of such an address): the address is not public (private,
// loopback, link-local, shared, multicast, documentation, unspecified,
// NAT64, 6to4, Teredo or another special-purpose range), or the port is
// not allowed. It names the address, never the URL. A dispatcher treats
// it as a failed attempt: the endpoint's name resolves where deliveries
// may not go.
var ErrRefusedAddress = errors.New("webhook: refused destination address")

// extraDenied are the ranges refused beside those of code.dny.dev/ssrf
// (its IANA special-purpose registries, and all IPv6 outside 2000::/3).
var (
	extraDeniedV4 = []netip.Prefix{
		// Azure's WireServer: a public address that reaches the host
		// platform from inside every Azure VM.
		netip.MustParsePrefix("168.63.129.16/32"),
	}
	extraDeniedV6 = []netip.Prefix{
		// SRv6 SIDs (RFC 9602), in the IANA registry since 2024 and
		// not in ssrf v0.3.0's list: never a webhook receiver.
		netip.MustParsePrefix("5f00::/16"),
	}
	guardian = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork(),
		ssrf.WithDeniedV4Prefixes(extraDeniedV4...),
		ssrf.WithDeniedV6Prefixes(extraDeniedV6...))
)

// specialNames are domains whose names never reach a public receiver
// (RFC 6761, RFC 6762, RFC 8375, RFC 7686, and .internal, which ICANN set
// aside for private use and clouds use for metadata services):
// CheckURL refuses them at once rather than leave them to the dial.
var specialNames = []string{"localhost", "local", "internal", "home.arpa", "test", "invalid", "example", "onion"}

// inwardNames are public domains and conventions known to resolve inward,
// to loopback or to whatever address a name spells: CheckURL refuses each
// name and every name under it at once, so that the person saving the URL
// learns it (the dial-time check would refuse every delivery anyway, and
// stays the guard for every other name). See docs/webhooks-hosts.md for
// why each is here.
var inwardNames = []string{
	// /etc/hosts convention: localhost.localdomain is 127.0.0.1 on many
	// systems, and .localdomain is no top-level domain.
	"localdomain",
	// Wildcard DNS that answers the address a name embeds
	// (10.0.0.1.nip.io, 10-0-0-1.sslip.io, 0a000001.nip.io).
	"nip.io", "sslip.io", "xip.io", "traefik.me", "local.gd",
	// Wildcard DNS that answers 127.0.0.1 for every name.
	"localtest.me", "lvh.me", "vcap.me", "fuf.me", "localho.st", "lacolhost.com", "localhost.direct",
}

// CheckURL returns the parsed URL when raw may be an endpoint's under e,
// and otherwise an error wrapping [ErrInvalidURL] (with [ErrRefusedAddress]
// too for an IP literal that is not public) that names the rule broken,
// without quoting raw. The rules:
//
//   - at most [MaxURLLength] bytes of ASCII without spaces or control
//     characters (percent-encode the rest);
//   - absolute, with scheme https, or http when e.AllowHTTP;
//   - no user info (not even an empty "@"), and no fragment;
//   - the port, when given, 443 for https and 80 for http, or one of
//     e.Ports (any, for loopback when e.AllowLoopback);
//   - the host an IP literal of a public address (an IPv4-mapped IPv6
//     literal is checked as its IPv4 address; zones are refused), or a
//     host name of at least two labels of letters, digits and inner
//     hyphens (1 to 63 characters each, 253 in all, one trailing dot
//     allowed, Unicode names in their xn-- form) whose last label starts
//     with a letter, so that no numeric form of an address ("127.1",
//     "0x7f000001", "2130706433") passes as a name, and which is not in
//     a special-use domain (localhost, local, internal, home.arpa, test,
//     invalid, example, onion; localhost is allowed with e.AllowLoopback),
//     nor a name known to resolve inward: under localdomain
//     (localhost.localdomain), or of a wildcard DNS service that answers
//     loopback or the address the name spells (nip.io, sslip.io, xip.io,
//     traefik.me, local.gd, localtest.me, lvh.me, vcap.me, fuf.me,
//     localho.st, lacolhost.com, localhost.direct), e.AllowLoopback or not.
//
// A name is not resolved here: that is [Egress.CheckDNS]'s, and the
// client checks every address again as it connects.
func (e Egress) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidURL, MaxURLLength)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return nil, fmt.Errorf("%w: a space, control or non-ASCII character (percent-encode it)", ErrInvalidURL)
		}
	}
	if strings.Contains(raw, "#") {
		return nil, fmt.Errorf("%w: a fragment (#)", ErrInvalidURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes raw: say less.
		return nil, fmt.Errorf("%w: not a URL", ErrInvalidURL)
	}
	if err := e.checkParsed(u); err != nil {
		return nil, err
	}
	return u, nil
}

// checkParsed applies CheckURL's rules that a parsed URL still shows: the
// client runs it on every request.
func (e Egress) checkParsed(u *url.URL) error {
	switch {
	case u.Scheme == "http" && !e.AllowHTTP:
		return fmt.Errorf("%w: http is not allowed, only https", ErrInvalidURL)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%w: not an absolute https URL", ErrInvalidURL)
	case u.Opaque != "" || u.Host == "":
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	case u.User != nil:
		return fmt.Errorf("%w: user info (credentials) in the URL", ErrInvalidURL)
	case u.Fragment != "" || u.RawFragment != "":
		return fmt.Errorf("%w: a fragment (#)", ErrInvalidURL)
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("%w: port out of range", ErrInvalidURL)
		}
		port = int(n)
	}
	host := u.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return fmt.Errorf("%w: an IPv6 zone", ErrInvalidURL)
		}
		addr = addr.Unmap()
		if e.AllowLoopback && addr.IsLoopback() {
			return nil
		}
		if err := e.checkAddr(addr); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidURL, err)
		}
	} else if strings.HasPrefix(u.Host, "[") {
		return fmt.Errorf("%w: not an IPv6 literal in brackets", ErrInvalidURL)
	} else {
		name := strings.ToLower(strings.TrimSuffix(host, "."))
		if err := checkHostName(name); err != nil {
			return err
		}
		if e.AllowLoopback && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
			return nil
		}
		if inDomain(name, specialNames) {
			return fmt.Errorf("%w: a host name of a special-use domain (such as localhost, .local or .internal), which no public receiver has", ErrInvalidURL)
		}
		if inDomain(name, inwardNames) {
			return fmt.Errorf("%w: a host name known to resolve to loopback or to the address it spells (a localhost alias or a wildcard DNS service), not to a public receiver", ErrInvalidURL)
		}
	}
	if !e.portAllowed(u.Scheme, port) {
		return fmt.Errorf("%w: port %d is not allowed for %s", ErrInvalidURL, port, u.Scheme)
	}
	return nil
}

// checkHostName checks name (lowercase, without its trailing dot) as
// CheckURL describes.
func checkHostName(name string) error {
	if len(name) > 253 {
		return fmt.Errorf("%w: a host name longer than 253 characters", ErrInvalidURL)
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 && name != "localhost" {
		return fmt.Errorf("%w: a host name of one label (give the full name)", ErrInvalidURL)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("%w: a host name label empty, longer than 63 characters, or with a hyphen at an end", ErrInvalidURL)
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%w: a host name with a character other than letters, digits and hyphens", ErrInvalidURL)
			}
		}
	}
	if last := labels[len(labels)-1]; last[0] < 'a' || last[0] > 'z' {
		return fmt.Errorf("%w: a host name whose last label does not start with a letter (a numeric address?)", ErrInvalidURL)
	}
	return nil
}

// inDomain reports whether name is one of domains or under one.
func inDomain(name string, domains []string) bool {
	for _, d := range domains {
		if name == d || strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}

// portAllowed reports whether a URL of scheme may name port.
func (e Egress) portAllowed(scheme string, port int) bool {
	if scheme == "https" && port == 443 || scheme == "http" && port == 80 {
		return true
	}
	return slices.Contains(e.Ports, uint16(port))
}

// checkAddr returns an error wrapping ErrRefusedAddress unless addr
// (unmapped) is a public address.
func (e Egress) checkAddr(addr netip.Addr) error {
	addr = addr.Unmap()
	if e.AllowLoopback && addr.IsLoopback() {
		return nil
	}
	if err := guardian.SafeAddr(addr.WithZone("")); err != nil || addr.Zone() != "" {
		return fmt.Errorf("%w: %s is not a public address", ErrRefusedAddress, addr)
	}
	return nil
}

// CheckDNS resolves the host of u (a URL CheckURL returned) with
// e.Resolver and returns an error wrapping [ErrRefusedAddress] if any
// address it resolves to is one the client would refuse, or wrapping
// [ErrInvalidURL] if it resolves to none. It is feedback for the person
// saving an endpoint ("that name points into a private network"), not
// the defence: DNS may answer differently later, which is why the client
// checks each address again as it connects. An IP literal is checked as
// it is.
func (e Egress) CheckDNS(ctx context.Context, u *url.URL) error {
	host := u.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil {
		return e.checkAddr(addr)
	}
	r := e.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("webhook: resolve endpoint host: %w", ctxErr)
		}
		var dnsErr *net.DNSError
		reason := "lookup failed"
		if errors.As(err, &dnsErr) {
			reason = dnsErr.Err // without the name
		}
		return fmt.Errorf("%w: the host name does not resolve (%s)", ErrInvalidURL, reason)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w: the host name resolves to no address", ErrInvalidURL)
	}
	for _, a := range addrs {
		if err := e.checkAddr(a); err != nil {
			return err
		}
	}
	return nil
}
