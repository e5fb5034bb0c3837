package stored

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/formsapi/formsapi"
)

// CheckErase refuses an erasure that could match nothing by mistake: an
// empty account, field or value is a caller's bug (an unset variable, a
// blank form field), never a request to erase every submission.
func CheckErase(accountID, field, value string) error {
	switch {
	case accountID == "":
		return fmt.Errorf("%w: erase: empty account ID", formsapi.ErrInvalidInput)
	case !plainText(accountID):
		return fmt.Errorf("%w: erase: the account ID is not UTF-8 or holds a control character", formsapi.ErrInvalidInput)
	case field == "":
		return fmt.Errorf("%w: erase: empty field name", formsapi.ErrInvalidInput)
	case value == "":
		return fmt.Errorf("%w: erase: empty value", formsapi.ErrInvalidInput)
	}
	return nil
}

// CheckDeletion refuses the arguments of a deletion or an update that no
// stored form or submission could have, the same way on every store (a
// database would otherwise refuse some of them with an error of its
// own): an account ID that is empty, not UTF-8 or holds a control
// character, a malformed form ID, and, when deleting a submission
// (submission is true), an ID that is empty, not UTF-8 or holds a
// control character.
func CheckDeletion(accountID, formID string, submission bool, id string) error {
	switch {
	case accountID == "" || !plainText(accountID):
		return fmt.Errorf("%w: account ID %q is empty, not UTF-8 or holds a control character", formsapi.ErrInvalidInput, accountID)
	case !formsapi.ValidFormID(formID):
		return fmt.Errorf("%w: form ID %q is malformed", formsapi.ErrInvalidInput, formID)
	case submission && id == "":
		return fmt.Errorf("%w: empty submission ID", formsapi.ErrInvalidInput)
	case submission && !plainText(id):
		return fmt.Errorf("%w: submission ID %q is not UTF-8 or holds a control character", formsapi.ErrInvalidInput, id)
	}
	return nil
}

// plainText reports whether s is UTF-8 without control characters (C0,
// DEL, C1): what every store accepts in an account or submission ID.
func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r < 0xa0 {
			return false
		}
	}
	return true
}

// Holds reports whether data, a submission's JSON object, has a member
// named field at its top level whose value is the JSON string value, both
// compared after unescaping: the one rule by which every store's Erase
// matches. A name given twice matches by either value (an erasure must
// not miss the copy encoding/json would drop). Data that does not decode
// (damaged by hand) matches nothing.
func Holds(data []byte, field, value string) bool {
	if !json.Valid(data) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false
		}
		if name, _ := t.(string); name != field || len(v) == 0 || v[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil && s == value {
			return true
		}
	}
	return false
}

// TombstoneRetention is how long the library's stores keep a deletion in
// a form's sync feed unless told otherwise (each store's
// WithTombstoneRetention): 30 days, as ODK Central keeps deleted
// submissions. A feed consumer that polls at least this often never has
// to start over.
const TombstoneRetention = 30 * 24 * time.Hour
