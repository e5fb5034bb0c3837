package formsapi

import (
	"bytes"
	"compress/gzip"
	"strings"
	"sync"
)

// Compression. A 100-item page is about 46 KB of repetitive JSON, which
// gzip shrinks several times over. The handler compresses a body of at
// least gzipMinSize bytes when the request's Accept-Encoding allows gzip;
// smaller bodies (errors, short pages) gain too little to pay for it.
// Writers come from a pool, and the body is compressed whole before the
// status is written, so Content-Length is exact and a HEAD carries the
// same headers as its GET.

// gzipMinSize is the smallest body worth compressing.
const gzipMinSize = 1024

// gzipLevel trades ratio for CPU: at level 1 a page compresses about as
// well as at the default level (JSON is that repetitive) for a fraction of
// the time, and on a busy server the CPU is what runs out.
const gzipLevel = gzip.BestSpeed

var gzipPool = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(nil, gzipLevel)
	if err != nil {
		panic(err) // a constant, valid level
	}
	return w
}}

var gzipBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// acceptsGzip reports whether Accept-Encoding field values vals allow a
// gzip-coded answer (RFC 9110 §12.5.3): gzip (or x-gzip) listed with a
// non-zero weight, or else "*" with one.
func acceptsGzip(vals []string) bool {
	gzipQ, starQ := -1, -1 // -1: not listed; 0: refused; 1: acceptable
	for _, v := range vals {
		for _, elem := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(elem, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			q := 1
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(p, "=")
				if strings.EqualFold(strings.TrimSpace(k), "q") && zeroWeight(strings.TrimSpace(val)) {
					q = 0
				}
			}
			switch name {
			case "gzip", "x-gzip":
				gzipQ = q
			case "*":
				starQ = q
			}
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

// zeroWeight reports whether a qvalue is 0 ("0", "0.", "0.000").
func zeroWeight(q string) bool {
	if q == "" || q[0] != '0' {
		return false
	}
	return strings.Trim(q[1:], ".0") == "" && strings.Count(q, ".") <= 1
}

// gzipped is body gzip-coded once, for a body that never changes and is
// served often: compressing it afresh would cost several times the rest
// of its answer.
func gzipped(body []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		panic(err) // a constant, valid level
	}
	zw.Write(body) // a bytes.Buffer does not fail
	zw.Close()
	return buf.Bytes()
}

// compress returns body gzip-coded, and a function that gives the buffer
// back to the pool once the answer is written.
func compress(body []byte) ([]byte, func()) {
	buf := gzipBufPool.Get().(*bytes.Buffer)
	buf.Reset()
	zw := gzipPool.Get().(*gzip.Writer)
	zw.Reset(buf)
	zw.Write(body) // a bytes.Buffer does not fail
	zw.Close()
	gzipPool.Put(zw)
	return buf.Bytes(), func() {
		if buf.Cap() <= 4<<20 {
			gzipBufPool.Put(buf)
		}
	}
}
