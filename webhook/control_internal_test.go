package webhook

import (
	"errors"
	"testing"
)

// TestControl: the dialer's hook on its own, for what a URL check would
// refuse before it (ports, networks), so that the hook holds by itself.
func TestControl(t *testing.T) {
	t.Parallel()
	cases := []struct {
		e       Egress
		network string
		address string
		ok      bool
	}{
		{Egress{}, "tcp4", "8.8.8.8:443", true},
		{Egress{}, "tcp6", "[2606:4700:4700::1111]:443", true},
		{Egress{}, "tcp4", "8.8.8.8:80", false},
		{Egress{AllowHTTP: true}, "tcp4", "8.8.8.8:80", true},
		{Egress{AllowHTTP: true}, "tcp4", "8.8.8.8:8080", false},
		{Egress{}, "tcp4", "8.8.8.8:8443", false},
		{Egress{Ports: []uint16{8443}}, "tcp4", "8.8.8.8:8443", true},
		{Egress{}, "tcp4", "8.8.8.8:22", false},
		{Egress{}, "tcp4", "8.8.8.8:0", false},
		{Egress{}, "udp4", "8.8.8.8:443", false},
		{Egress{}, "tcp", "8.8.8.8:443", false},
		{Egress{}, "unix", "/run/docker.sock", false},
		{Egress{}, "tcp4", "example.com:443", false},
		{Egress{}, "tcp4", "8.8.8.8", false},
		{Egress{}, "tcp6", "[fe80::1%eth0]:443", false},
		{Egress{}, "tcp6", "[::ffff:8.8.8.8]:443", true},
		{Egress{}, "tcp6", "[::ffff:127.0.0.1]:443", false},
		{Egress{}, "tcp4", "127.0.0.1:443", false},
		{Egress{AllowLoopback: true}, "tcp4", "127.0.0.1:33333", true},
		{Egress{AllowLoopback: true}, "tcp6", "[::1]:33333", true},
		{Egress{AllowLoopback: true}, "tcp4", "10.0.0.1:443", false},
		{Egress{AllowLoopback: true}, "tcp4", "169.254.169.254:80", false},
		{Egress{AllowLoopback: true}, "tcp4", "0.0.0.0:443", false},
	}
	for _, c := range cases {
		err := c.e.control(c.network, c.address, nil)
		switch {
		case c.ok && err != nil:
			t.Errorf("%+v %s %s: %v", c.e, c.network, c.address, err)
		case !c.ok && !errors.Is(err, ErrRefusedAddress):
			t.Errorf("%+v %s %s: %v, want ErrRefusedAddress", c.e, c.network, c.address, err)
		}
	}
}
