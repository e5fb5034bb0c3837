package formsapi

import (
	"crypto/rand"

	"github.com/formsapi/formsapi/internal/keyformat"
)

// formIDLen is the length of the IDs NewFormID returns.
const formIDLen = 22

// NewFormID returns a fresh form ID: 22 base62 characters from
// crypto/rand (about 131 random bits), which [ValidFormID] accepts and no
// one can guess.
//
// Form IDs are unique across all accounts, because the collection side
// ([Writer.AddSubmission]) names a form by its ID alone. So AddForm
// answers [ErrFormExists] for an ID another account already uses: a host
// that let its customers choose form IDs would tell them which IDs other
// tenants have. Give every new form an ID from NewFormID instead, and
// keep any name the customer chooses in the form's Title.
func NewFormID() string {
	b := make([]byte, 0, formIDLen)
	var buf [32]byte
	for len(b) < formIDLen {
		rand.Read(buf[:]) // never fails (crypto/rand docs)
		for _, c := range buf {
			// 248 = 4*62: rejecting larger bytes keeps every character
			// equally likely.
			if c < 248 && len(b) < formIDLen {
				b = append(b, keyformat.Base62[c%62])
			}
		}
	}
	return string(b)
}
