package webhook_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
)

// fakeDNS is a DNS server in the test's process, behind a *net.Resolver
// that Go's own resolver code drives (PreferGo, a Dial to a pipe), so a
// name resolves to whatever answer says without touching the network or
// /etc/hosts. answer is called once per question (A, then AAAA, maybe
// concurrently) with the name asked, lowercase and without its final dot.
type fakeDNS struct {
	answer func(name string, aaaa bool) []netip.Addr

	mu    sync.Mutex
	asked map[string]int // questions per name, A and AAAA together
}

func newFakeDNS(answer func(name string, aaaa bool) []netip.Addr) *fakeDNS {
	return &fakeDNS{answer: answer, asked: map[string]int{}}
}

// staticDNS resolves each name of m to its addresses (A and AAAA records
// as each address is), and any other name to nothing.
func staticDNS(m map[string][]string) *fakeDNS {
	return newFakeDNS(func(name string, aaaa bool) []netip.Addr {
		var out []netip.Addr
		for _, s := range m[name] {
			a := netip.MustParseAddr(s)
			if a.Is4() != aaaa {
				out = append(out, a)
			}
		}
		return out
	})
}

func (f *fakeDNS) questions(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[name]
}

// Resolver returns a resolver that asks f.
func (f *fakeDNS) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			// Not a PacketConn, so Go frames messages as over TCP.
			client, server := net.Pipe()
			go f.serve(server)
			return client, nil
		},
	}
}

func (f *fakeDNS) serve(c net.Conn) {
	defer c.Close()
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return
	}
	q := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(c, q); err != nil {
		return
	}
	// The question: 12 bytes of header, then the name's labels, then
	// type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	question := q[12 : i+5]
	qtype := binary.BigEndian.Uint16(q[i+1:])
	name := strings.ToLower(strings.Join(labels, "."))
	f.mu.Lock()
	f.asked[name]++
	f.mu.Unlock()
	var addrs []netip.Addr
	if qtype == 1 || qtype == 28 {
		addrs = f.answer(name, qtype == 28)
	}
	r := make([]byte, 12, 512)
	copy(r, q[:2])                            // the ID
	binary.BigEndian.PutUint16(r[2:], 0x8180) // a response, recursion desired and available, no error
	binary.BigEndian.PutUint16(r[4:], 1)      // one question
	binary.BigEndian.PutUint16(r[6:], uint16(len(addrs)))
	r = append(r, question...)
	for _, a := range addrs {
		r = append(r, 0xc0, 12) // the question's name
		typ, rdata := uint16(1), a.AsSlice()
		if a.Is6() {
			typ = 28
		}
		r = binary.BigEndian.AppendUint16(r, typ)
		r = binary.BigEndian.AppendUint16(r, 1) // IN
		r = binary.BigEndian.AppendUint32(r, 0) // TTL
		r = binary.BigEndian.AppendUint16(r, uint16(len(rdata)))
		r = append(r, rdata...)
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(len(r)))
	c.Write(append(out, r...)) // a resolver that gave up has closed its end

}
