package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/webhook"
	"github.com/matryer/is"
)

func TestCheckURLAccepts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		egress webhook.Egress
		urls   []string
	}{
		{webhook.Egress{}, []string{
			"https://example.com/hook",
			"https://hooks.example.com:443/a/b?token=abc&x=%20y",
			"HTTPS://Hooks.Example.COM./x", // scheme and host in any case, a trailing dot
			"https://xn--bcher-kva.de/",    // Unicode in its xn-- form
			"https://a-b.c-d.io",
			"https://8.8.8.8/hook",
			"https://[2606:4700:4700::1111]/hook",
			"https://[::ffff:8.8.8.8]/", // mapped, checked as 8.8.8.8
			"https://" + strings.Repeat("a", 63) + ".com/",
			// Look-alikes of names known to resolve inward, which do not.
			"https://mynip.io/", "https://nip.io.example.com/", "https://lvh.me.example.com/",
			"https://localdomain.example.com/", "https://localhost-localdomain.com/",
			"https://example.com/" + strings.Repeat("p", webhook.MaxURLLength-len("https://example.com/")),
		}},
		{webhook.Egress{Ports: []uint16{8443}}, []string{"https://example.com:8443/"}},
		{webhook.Egress{AllowHTTP: true}, []string{"http://example.com/", "http://example.com:80/", "https://example.com/"}},
		{webhook.Egress{AllowHTTP: true, Ports: []uint16{8080}}, []string{"http://example.com:8080/", "https://example.com:8080/"}},
		{webhook.Egress{AllowHTTP: true, AllowLoopback: true}, []string{
			"http://127.0.0.1:54321/hook", "http://[::1]:9/", "http://localhost:8080/", "https://localhost/",
			"http://api.localhost:1234/", "http://127.9.9.9:1/", "http://[::ffff:127.0.0.1]:2/",
		}},
	}
	for _, c := range cases {
		for _, raw := range c.urls {
			is := is.New(t)
			u, err := c.egress.CheckURL(raw)
			is.NoErr(err) // accepted
			is.True(u != nil && u.Host != "")
		}
	}
}

// TestCheckURLRefuses: each URL is refused, with ErrInvalidURL, and the
// error quotes neither the URL nor its host.
func TestCheckURLRefuses(t *testing.T) {
	t.Parallel()
	plain := webhook.Egress{}
	http := webhook.Egress{AllowHTTP: true}
	loop := webhook.Egress{AllowHTTP: true, AllowLoopback: true}
	cases := []struct {
		egress  webhook.Egress
		raw     string
		address bool // also ErrRefusedAddress
	}{
		{plain, "http://example.com/", false},
		{plain, "ftp://example.com/", false},
		{plain, "ws://example.com/", false},
		{plain, "file:///etc/passwd", false},
		{plain, "https:example.com", false},
		{plain, "https:///path", false},
		{plain, "//example.com/", false},
		{plain, "/hook", false},
		{plain, "example.com/hook", false},
		{plain, "", false},
		{plain, "https://user:pass@example.com/", false},
		{plain, "https://user@example.com/", false},
		{plain, "https://@example.com/", false},
		{plain, "https://example.com\\@evil.com/", false},
		{plain, "https://example.com/#frag", false},
		{plain, "https://example.com/#", false},
		{plain, "https://example.com/" + strings.Repeat("p", webhook.MaxURLLength), false},
		{plain, "https://exa mple.com/", false},
		{plain, "https://example.com/a b", false},
		{plain, "https://example.com/\x00", false},
		{plain, "https://example.com/\x7f", false},
		{plain, "https://example.com/\t", false},
		{plain, "https://bücher.de/", false},
		{plain, "https://example.com:8443/", false},
		{plain, "https://example.com:80/", false},
		{plain, "https://example.com:0/", false},
		{plain, "https://example.com:99999/", false},
		{http, "http://example.com:443/", false},
		{http, "http://example.com:8080/", false},
		{plain, "https://intranet/", false},
		{plain, "https://localhost/", false},
		{plain, "https://LOCALHOST./", false},
		{plain, "https://api.localhost/", false},
		{plain, "https://metadata.google.internal/", false},
		{plain, "https://printer.local/", false},
		{plain, "https://router.home.arpa/", false},
		{plain, "https://hooks.example/", false},
		{plain, "https://x.test/", false},
		{plain, "https://abc.onion/", false},
		{plain, "https://-bad.example.com/", false},
		{plain, "https://bad-.example.com/", false},
		{plain, "https://a..b.com/", false},
		{plain, "https://under_score.com/", false},
		{plain, "https://" + strings.Repeat("a", 64) + ".com/", false},
		{plain, "https://" + strings.Repeat("abcdefghi.", 25) + "comm/", false}, // 254
		{plain, "https://127.1/", false},
		{plain, "https://0x7f000001/", false},
		{plain, "https://0x7f.0.0.1/", false},
		{plain, "https://2130706433/", false},
		{plain, "https://017700000001/", false},
		{plain, "https://1.2.3.4.5/", false},
		{plain, "https://[::1/", false},
		{plain, "https://[example.com]/", false},
		{plain, "https://[fe80::1%25eth0]/", false},
		{plain, "https://127.0.0.1/", true},
		{plain, "https://10.1.2.3/", true},
		{plain, "https://172.16.0.1/", true},
		{plain, "https://192.168.0.1/", true},
		{plain, "https://169.254.169.254/latest/meta-data/", true},
		{plain, "https://[::ffff:169.254.169.254]/", true},
		{plain, "https://0.0.0.0/", true},
		{plain, "https://[::]/", true},
		{plain, "https://[::1]/", true},
		{plain, "https://100.64.0.1/", true},
		{plain, "https://192.0.2.1/", true},
		{plain, "https://[fe80::1]/", true},
		{plain, "https://[ff02::1]/", true},
		{plain, "https://[fd00:ec2::254]/", true},
		{plain, "https://[64:ff9b::7f00:1]/", true},
		{plain, "https://[2002:7f00:1::1]/", true},
		{plain, "https://168.63.129.16/", true},
		{http, "http://127.0.0.1:8080/", true}, // http alone allows no loopback
		{loop, "http://10.0.0.1/", true},       // loopback alone allows no private range
		{loop, "http://192.168.1.1:8080/", true},
		{loop, "http://169.254.169.254/", true},
		{loop, "http://example.com:8080/", false}, // any port for loopback only
		{loop, "http://printer.local/", false},
		// Names known to resolve inward (issue 42: the save-time check
		// let them through, the dial-time check stopped every one),
		// refused with AllowLoopback too.
		{plain, "https://localhost.localdomain/", false},
		{plain, "https://LOCALHOST.LOCALDOMAIN./", false},
		{plain, "https://db.localdomain/", false},
		{plain, "https://127.0.0.1.nip.io/", false},
		{plain, "https://169.254.169.254.nip.io/latest/", false},
		{plain, "https://app.10.0.0.1.nip.io/", false},
		{plain, "https://0a000001.nip.io/", false},
		{plain, "https://nip.io/", false},
		{plain, "https://10-0-0-1.sslip.io/", false},
		{plain, "https://127.0.0.1.xip.io/", false},
		{plain, "https://192-168-1-1.traefik.me/", false},
		{plain, "https://x.local.gd/", false},
		{plain, "https://localtest.me/", false},
		{plain, "https://hooks.localtest.me/", false},
		{plain, "https://a.lvh.me/", false},
		{plain, "https://x.vcap.me/", false},
		{plain, "https://x.fuf.me/", false},
		{plain, "https://x.localho.st/", false},
		{plain, "https://x.lacolhost.com/", false},
		{plain, "https://x.localhost.direct/", false},
		{loop, "http://localhost.localdomain:8080/", false},
		{loop, "http://a.lvh.me:8080/", false},
	}
	for _, c := range cases {
		is := is.New(t)
		u, err := c.egress.CheckURL(c.raw)
		if err == nil {
			t.Errorf("%q: accepted", c.raw)
			continue
		}
		is.True(u == nil)
		is.True(errors.Is(err, webhook.ErrInvalidURL))                 // the sentinel
		is.Equal(errors.Is(err, webhook.ErrRefusedAddress), c.address) // and the address's, for IP literals
		if len(c.raw) > len("https://x") {
			is.True(!strings.Contains(err.Error(), c.raw)) // the URL is not quoted
		}
		// (The message's own "localhost" aside.)
		if host := hostOf(c.raw); len(host) > 4 && !c.address && !strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") && strings.Contains(err.Error(), host) {
			t.Errorf("%q: the error quotes the host: %v", c.raw, err)
		}
	}
}

// hostOf is the text between "//" and the next "/", ":" or "?".
func hostOf(raw string) string {
	_, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/:?"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func TestCheckDNS(t *testing.T) {
	t.Parallel()
	dns := staticDNS(map[string][]string{
		"public.example.com":  {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"private.example.com": {"10.0.0.7"},
		"mixed.example.com":   {"93.184.215.14", "192.168.1.1"},
		"mapped.example.com":  {"::ffff:169.254.169.254"},
		"nat64.example.com":   {"64:ff9b::a9fe:a9fe"},
		"loop.example.com":    {"127.0.0.1"},
	})
	e := webhook.Egress{Resolver: dns.Resolver()}
	check := func(e webhook.Egress, raw string) error {
		u, err := e.CheckURL(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return e.CheckDNS(context.Background(), u)
	}
	is := is.New(t)
	is.NoErr(check(e, "https://public.example.com/"))                                                       // every address public
	is.NoErr(check(e, "https://8.8.8.8/"))                                                                  // a literal, as it is
	is.True(errors.Is(check(e, "https://private.example.com/"), webhook.ErrRefusedAddress))                 // private
	is.True(errors.Is(check(e, "https://mixed.example.com/"), webhook.ErrRefusedAddress))                   // one private address is enough
	is.True(errors.Is(check(e, "https://mapped.example.com/"), webhook.ErrRefusedAddress))                  // IPv4-mapped link-local
	is.True(errors.Is(check(e, "https://nat64.example.com/"), webhook.ErrRefusedAddress))                   // NAT64
	is.True(errors.Is(check(e, "https://loop.example.com/"), webhook.ErrRefusedAddress))                    // loopback
	is.NoErr(check(webhook.Egress{Resolver: e.Resolver, AllowLoopback: true}, "https://loop.example.com/")) // unless allowed
	err := check(e, "https://nowhere.example.com/")
	is.True(errors.Is(err, webhook.ErrInvalidURL))     // resolves to nothing
	is.True(!strings.Contains(err.Error(), "nowhere")) // the name not quoted
	is.True(dns.questions("public.example.com") > 0)   // the fake was asked
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u, _ := e.CheckURL("https://public.example.com/")
	is.True(errors.Is(e.CheckDNS(ctx, u), context.Canceled)) // the context
}
