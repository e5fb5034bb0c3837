package formsapi

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/formsapi/formsapi/internal/wire"
)

// Limits bounds what the write side accepts in one submission, so that
// everything stored can be read back: by this library's read side, and by
// any mainstream JSON parser a client uses. Every store of this module
// takes them as an option (WithLimits) and refuses a submission beyond
// them with an error wrapping [ErrInvalidInput] that names the limit.
//
// A field of zero or less takes its value from [DefaultLimits].
type Limits struct {
	// MaxDataBytes bounds the length of Submission.Data as given.
	MaxDataBytes int
	// MaxDepth bounds how deeply Data nests objects and arrays; Data
	// itself is level 1. The API adds three levels around it (the response
	// object, the submissions array, the submission), so the default of 20
	// gives responses at most 23 levels deep. A value above 9,997 counts as
	// 9,997: deeper responses pass encoding/json's limit of 10,000.
	MaxDepth int
	// MaxNumberLength bounds the characters of any one number in Data.
	// Numbers must also lie within the range of a 64-bit float.
	MaxNumberLength int
	// MaxAttachments bounds the length of Submission.Attachments.
	MaxAttachments int
	// MaxAttachmentString bounds each string of an attachment (fieldName,
	// fileUrl, mimeType), in bytes.
	MaxAttachmentString int
}

// DefaultLimits are the limits of a store made without WithLimits.
//
// The depth was chosen against the default nesting limits of mainstream
// parsers: Boost.JSON 32 (parse_options::max_depth), .NET
// System.Text.Json 64 (JsonSerializerOptions.MaxDepth), Ruby JSON.parse
// 100 (max_nesting), Jackson 1,000 (StreamReadConstraints, since 2.15),
// Python's json about 1,000 (the recursion limit), Go's encoding/json
// 10,000; JavaScript's JSON.parse in V8 has none. A response with data
// at depth 20 is 23 levels deep, within all of them. The number length,
// 100, is far within Jackson's 1,000 and Python's 4,300 digits for an int.
var DefaultLimits = Limits{
	MaxDataBytes:        1 << 20,
	MaxDepth:            20,
	MaxNumberLength:     100,
	MaxAttachments:      100,
	MaxAttachmentString: 2048,
}

// maxStoredDepth is the deepest data whose response encoding/json reads.
const maxStoredDepth = wire.MaxDataDepth

// orDefaults fills the fields of l that are zero or less from
// DefaultLimits and caps MaxDepth.
func (l Limits) orDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *int }{
		{&l.MaxDataBytes, &d.MaxDataBytes},
		{&l.MaxDepth, &d.MaxDepth},
		{&l.MaxNumberLength, &d.MaxNumberLength},
		{&l.MaxAttachments, &d.MaxAttachments},
		{&l.MaxAttachmentString, &d.MaxAttachmentString},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	l.MaxDepth = min(l.MaxDepth, maxStoredDepth)
	return l
}

// PrepareSubmission is [PrepareSubmission] under the limits l.
func (l Limits) PrepareSubmission(s *Submission, m Metadata) error {
	l = l.orDefaults()
	s.CreatedAt = storedTime(s.CreatedAt)
	if !ValidFormID(s.FormID) {
		return fmt.Errorf("%w: form ID %q is malformed", ErrInvalidInput, s.FormID)
	}
	if err := l.checkData(s.Data); err != nil {
		return err
	}
	if err := l.checkAttachments(s.Attachments); err != nil {
		return err
	}
	if len(m.Geo) > 0 && !json.Valid(m.Geo) {
		return fmt.Errorf("%w: metadata geo is not valid JSON", ErrInvalidInput)
	}
	return checkTime(s.CreatedAt)
}

func (l Limits) checkData(data []byte) error {
	if len(data) > l.MaxDataBytes {
		return fmt.Errorf("%w: submission data is %d bytes, over the limit MaxDataBytes (%d)", ErrInvalidInput, len(data), l.MaxDataBytes)
	}
	switch wire.CheckObject(data, l.MaxDepth, l.MaxNumberLength) {
	case wire.OK:
		return nil
	case wire.TooDeep:
		return fmt.Errorf("%w: submission data nests objects and arrays deeper than the limit MaxDepth (%d levels)", ErrInvalidInput, l.MaxDepth)
	case wire.NumberTooLong:
		return fmt.Errorf("%w: submission data has a number longer than the limit MaxNumberLength (%d characters)", ErrInvalidInput, l.MaxNumberLength)
	case wire.NumberOutOfRange:
		return fmt.Errorf("%w: submission data has a number beyond the range of a 64-bit float", ErrInvalidInput)
	case wire.LoneSurrogate:
		return fmt.Errorf("%w: submission data has a \\u escape of an unpaired UTF-16 surrogate", ErrInvalidInput)
	case wire.BadUTF8:
		return fmt.Errorf("%w: submission data is not valid UTF-8", ErrInvalidInput)
	}
	return fmt.Errorf("%w: submission data must be one JSON object", ErrInvalidInput)
}

func (l Limits) checkAttachments(atts []Attachment) error {
	if len(atts) > l.MaxAttachments {
		return fmt.Errorf("%w: %d attachments, over the limit MaxAttachments (%d)", ErrInvalidInput, len(atts), l.MaxAttachments)
	}
	for i, a := range atts {
		for _, f := range []struct{ name, v string }{{"fieldName", a.FieldName}, {"fileUrl", a.FileURL}, {"mimeType", a.MIMEType}} {
			if len(f.v) > l.MaxAttachmentString {
				return fmt.Errorf("%w: attachment %d: %s is %d bytes, over the limit MaxAttachmentString (%d)", ErrInvalidInput, i, f.name, len(f.v), l.MaxAttachmentString)
			}
			if msg := badText(f.v); msg != "" {
				return fmt.Errorf("%w: attachment %d: %s %s", ErrInvalidInput, i, f.name, msg)
			}
		}
		if !httpURL(a.FileURL) {
			return fmt.Errorf("%w: attachment %d: fileUrl must be an absolute http or https URL without spaces", ErrInvalidInput, i)
		}
		if a.FileSize < 0 {
			return fmt.Errorf("%w: attachment %d has negative size %d", ErrInvalidInput, i, a.FileSize)
		}
		if !mediaType(a.MIMEType) {
			return fmt.Errorf("%w: attachment %d: mimeType must be type/subtype, such as application/pdf", ErrInvalidInput, i)
		}
	}
	return nil
}

// badText says what is wrong with s as text, or "" if nothing is: it must
// be valid UTF-8 without control characters (C0, DEL or C1).
func badText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if r < 0x20 || 0x7f <= r && r <= 0x9f {
			return fmt.Sprintf("has the control character %U", r)
		}
	}
	return ""
}

// httpURL reports whether u is an absolute http or https URL with a host
// and no spaces.
func httpURL(u string) bool {
	if strings.ContainsRune(u, ' ') {
		return false
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return false
	}
	scheme := strings.ToLower(p.Scheme)
	return scheme == "http" || scheme == "https"
}

// mediaType reports whether t is a media type: type "/" subtype as RFC
// 6838 names them, optionally followed by parameters.
func mediaType(t string) bool {
	full, params, hasParams := strings.Cut(t, ";")
	typ, sub, ok := strings.Cut(strings.TrimSpace(full), "/")
	if !ok || !restrictedName(typ) || !restrictedName(sub) {
		return false
	}
	if hasParams {
		_, _, err := mime.ParseMediaType(t)
		return err == nil && strings.TrimSpace(params) != ""
	}
	return true
}

// restrictedName is RFC 6838's restricted-name: 1 to 127 characters, a
// letter or digit first, then letters, digits and ! # $ & - ^ _ . +.
func restrictedName(s string) bool {
	if s == "" || len(s) > 127 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune("!#$&-^_.+", rune(c)) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
