package formsapi_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/matryer/is"
)

func TestNewKey(t *testing.T) {
	is := is.New(t)
	format := regexp.MustCompile(`^fapi_[0-9A-Za-z]{38}$`)
	seen := map[string]bool{}
	chars := map[rune]int{}
	for i := 0; i < 2000; i++ {
		k, err := formsapi.NewKey()
		is.NoErr(err)                  // new key
		is.True(format.MatchString(k)) // prefix and base62 body
		is.NoErr(checkKey(k))          // its checksum holds
		is.True(!seen[k])              // never repeats
		seen[k] = true
		for _, c := range k[len(keyformat.Prefix) : len(k)-6] {
			chars[c]++
		}
	}
	is.Equal(len(chars), 62) // the random part uses the whole alphabet
}

func TestCheckKeyRejectsLookalikes(t *testing.T) {
	is := is.New(t)
	k, err := formsapi.NewKey()
	is.NoErr(err) // new key
	body := []byte(k)
	for i := len(keyformat.Prefix); i < len(body); i++ {
		changed := append([]byte(nil), body...)
		changed[i] = map[bool]byte{true: 'B', false: 'A'}[changed[i] == 'A']
		is.True(errors.Is(checkKey(string(changed)), formsapi.ErrInvalidInput)) // one character changed fails the checksum
	}
	for _, bad := range []string{k + "0", k[:len(k)-1], "", "a b", "tök", "a,b", strings.Repeat("a", maxKeyLen+1), "==", "a=b"} {
		is.True(errors.Is(checkKey(bad), formsapi.ErrInvalidInput)) // refused
	}
	for _, good := range []string{"host-format-key", "abc==", "a.b~c+d/e", strings.Repeat("a", maxKeyLen)} {
		is.NoErr(checkKey(good)) // a host's own token format
	}
}

func TestValidFormID(t *testing.T) {
	for id, want := range map[string]bool{
		"contact-a": true, "A.b_c~d-1": true, strings.Repeat("x", maxFormIDLen): true,
		"": false, ".": false, "..": false, "a/b": false, "a b": false, "été": false, "a\x00": false,
		strings.Repeat("x", maxFormIDLen+1): false, "x'OR'1'='1": false,
	} {
		if got := formsapi.ValidFormID(id); got != want {
			t.Errorf("ValidFormID(%q) = %v, want %v", id, got, want)
		}
	}
}

// The longest key and form ID the library takes, as documented.
const (
	maxKeyLen    = 256
	maxFormIDLen = 128
)

// checkKey is what a store's AddKey says of key alone.
func checkKey(key string) error {
	return formsapi.DefaultLimits.PrepareKeyOptions(key, "acct", &formsapi.KeyOptions{})
}
