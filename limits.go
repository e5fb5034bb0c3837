package formsapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/formsapi/formsapi/internal/wire"
)

// Limits bounds what the write side accepts, so that everything stored can
// be read back: by this library's read side, within the handler's page
// byte budget, and by any mainstream JSON parser a client uses. They bound
// a submission (its data, attachments, metadata and whole encoded size), a
// form (its encoded size) and an account ID. Every store of this module
// takes them as an option (WithLimits), applies them in AddForm,
// AddSubmission, AddKey and AddKeyWith through [Limits.PrepareForm],
// [Limits.PrepareSubmission] and [Limits.PrepareKeyOptions], and refuses
// input beyond them with an error wrapping [ErrInvalidInput] that names the
// limit, changing nothing.
//
// Sizes "as the API sends it" are counted after JSON escaping: a "<" in a
// string is six bytes (\u003c), as the stores keep it and as the page
// byte budget counts it.
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
	// MaxSubmissionBytes bounds a submission's JSON as the API sends it:
	// the length [AppendSubmissionJSON] makes for the submission as given,
	// escapes included. Stores keep that JSON (those that compact Data
	// keep at most as much) and the handler's page byte budget counts it.
	// The default, 2 MiB, admits the largest submission the other default
	// limits allow whose strings need few escapes (1 MiB of data and 100
	// attachments of three 2,048-byte strings come to about 1.6 MiB) and
	// refuses the rest: without it, attachment strings of "<" made one
	// submission 4.5 times the size of its data limit. It is half of
	// [DefaultPageBytes], so every submission fits a default page with
	// room and no page passes its budget. Raise it with MaxDataBytes, and
	// keep it within the handler's WithPageBytes.
	MaxSubmissionBytes int
	// MaxMetadataBytes bounds the four fields of [Metadata] together
	// (ClientIP, UserAgent, Geo and TraceID, as given), in bytes. Geo,
	// when present, must be valid JSON; bytes of any of them that are not
	// valid UTF-8 are stored as U+FFFD. The default, 64 KiB, is far beyond the request headers they come from
	// and keeps an attacker from storing megabytes the read API never
	// returns.
	MaxMetadataBytes int
	// MaxFormBytes bounds a form's JSON as the API sends it (formId,
	// title, icon, notificationEmail and createdAt, escapes included).
	// Title, icon and notificationEmail must also be valid UTF-8 without
	// control characters. The default, 4 KiB, leaves the three strings
	// about 3,800 bytes of JSON together, and keeps a page of
	// 1,000 (the largest page size by default) of the largest forms within
	// [DefaultPageBytes] (4 MiB), so the byte budget never shortens a
	// full page of forms under the defaults.
	MaxFormBytes int
	// MaxAccountIDBytes bounds account IDs, in bytes, in AddForm, AddKey
	// and AddKeyWith alike. Account IDs must also be non-empty, valid
	// UTF-8 without control characters: they go into rate-limit keys and
	// logs. The default is 256; the handler's rate-limit key is "account:"
	// and the ID, and pgstore's limiter takes keys of up to 512 bytes.
	MaxAccountIDBytes int
	// MaxKeyForms bounds the forms one API key may be scoped to
	// (KeyOptions.Forms). The default is 1,000.
	MaxKeyForms int
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
// The sizes are explained at their fields.
var DefaultLimits = Limits{
	MaxDataBytes:        1 << 20,
	MaxDepth:            20,
	MaxNumberLength:     100,
	MaxAttachments:      100,
	MaxAttachmentString: 2048,
	MaxSubmissionBytes:  2 << 20,
	MaxMetadataBytes:    64 << 10,
	MaxFormBytes:        4 << 10,
	MaxAccountIDBytes:   256,
	MaxKeyForms:         1000,
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
		{&l.MaxSubmissionBytes, &d.MaxSubmissionBytes},
		{&l.MaxMetadataBytes, &d.MaxMetadataBytes},
		{&l.MaxFormBytes, &d.MaxFormBytes},
		{&l.MaxAccountIDBytes, &d.MaxAccountIDBytes},
		{&l.MaxKeyForms, &d.MaxKeyForms},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	l.MaxDepth = min(l.MaxDepth, maxStoredDepth)
	return l
}

// PrepareSubmission readies s and its metadata m for storage under the
// limits l: a zero CreatedAt becomes the current time, times are kept in
// UTC, and bytes of m's fields that are not valid UTF-8 (a raw header
// value, say) become U+FFFD, since metadata is recorded as it came and
// never returned. It returns an error wrapping [ErrInvalidInput] that
// says which field and, for a limit, which one, if s cannot be stored:
// its form ID is malformed; its Data is not one JSON object in valid
// UTF-8, is longer, deeper or has longer numbers than the limits allow,
// has a number beyond the range of a 64-bit float or a \u escape of an
// unpaired UTF-16 surrogate; it has more attachments than allowed, or an
// attachment whose strings are too long, not valid UTF-8 or hold control
// characters, whose fileUrl is not an absolute http or https URL, whose
// size is negative or whose mimeType is not type/subtype; m's fields are
// longer together than MaxMetadataBytes, or m.Geo is present but not
// valid JSON; its CreatedAt is out of range; or its JSON as the API sends
// it ([AppendSubmissionJSON], escapes included) is longer than
// MaxSubmissionBytes. Stores call it before writing, so that every store
// refuses the same input; [DefaultLimits].PrepareSubmission is the check
// under the defaults.
func (l Limits) PrepareSubmission(s *Submission, m *Metadata) error {
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
	if err := l.prepareMetadata(m); err != nil {
		return err
	}
	if err := checkTime(s.CreatedAt); err != nil {
		return err
	}
	return l.checkSubmissionSize(*s)
}

// checkSubmissionSize refuses s if its JSON as the API sends it passes
// MaxSubmissionBytes. Callers have checked s's data, attachments and time,
// so it encodes.
func (l Limits) checkSubmissionSize(s Submission) error {
	// The encoding is never shorter than the data, which it copies.
	if len(s.Data) > l.MaxSubmissionBytes {
		return fmt.Errorf("%w: submission data alone is %d bytes, over the limit MaxSubmissionBytes (%d) for the submission as the API sends it",
			ErrInvalidInput, len(s.Data), l.MaxSubmissionBytes)
	}
	var n int
	var err error
	withBuffer(func(b []byte) []byte {
		b, err = AppendSubmissionJSON(b, s)
		n = len(b)
		return b
	})
	if err != nil {
		return fmt.Errorf("%w: submission: %v", ErrInvalidInput, err)
	}
	if n > l.MaxSubmissionBytes {
		return fmt.Errorf("%w: submission is %d bytes as the API sends it (escapes included), over the limit MaxSubmissionBytes (%d)",
			ErrInvalidInput, n, l.MaxSubmissionBytes)
	}
	return nil
}

// prepareMetadata refuses m if its fields together pass MaxMetadataBytes
// or Geo is present but not valid JSON, and replaces the bytes of its
// fields that are not valid UTF-8 with U+FFFD.
func (l Limits) prepareMetadata(m *Metadata) error {
	if n := len(m.ClientIP) + len(m.UserAgent) + len(m.Geo) + len(m.TraceID) + len(m.ID); n > l.MaxMetadataBytes {
		return fmt.Errorf("%w: metadata is %d bytes (client IP, user agent, geo, trace ID and ID together), over the limit MaxMetadataBytes (%d)",
			ErrInvalidInput, n, l.MaxMetadataBytes)
	}
	if len(m.ID) > maxSubmissionIDBytes {
		return fmt.Errorf("%w: metadata ID is %d bytes, over %d", ErrInvalidInput, len(m.ID), maxSubmissionIDBytes)
	}
	if bad := badText(m.ID); bad != "" {
		return fmt.Errorf("%w: metadata ID %s", ErrInvalidInput, bad)
	}
	for _, f := range []*string{&m.ClientIP, &m.UserAgent, &m.TraceID} {
		if !utf8.ValidString(*f) {
			*f = strings.ToValidUTF8(*f, "\uFFFD")
		}
	}
	if len(m.Geo) > 0 {
		if !json.Valid(m.Geo) {
			return fmt.Errorf("%w: metadata geo is not valid JSON", ErrInvalidInput)
		}
		if !utf8.Valid(m.Geo) {
			// Inside valid JSON such bytes can only be in strings.
			m.Geo = bytes.ToValidUTF8(m.Geo, []byte("\uFFFD"))
		}
	}
	return nil
}

// PrepareForm readies f, a form of accountID, for storage under the
// limits l: a zero CreatedAt becomes the current time, and times are kept
// in UTC. It returns an error wrapping [ErrInvalidInput] that says which
// field and, for a limit, which one, if f cannot be stored: accountID is
// empty, longer than MaxAccountIDBytes, not valid UTF-8 or holds a
// control character; the form ID is malformed (see [ValidFormID]); the
// title, icon or notificationEmail is not valid UTF-8 or holds a control
// character (C0, DEL or C1); the form's JSON as the API sends it, escapes
// included, is longer than MaxFormBytes; or CreatedAt is outside the years
// 1678 to 2261. Stores call it before writing, so that every store
// refuses the same input; [DefaultLimits].PrepareForm is the check under
// the defaults.
func (l Limits) PrepareForm(accountID string, f *Form) error {
	l = l.orDefaults()
	f.CreatedAt = storedTime(f.CreatedAt)
	if err := l.checkAccountID(accountID); err != nil {
		return err
	}
	if !ValidFormID(f.ID) {
		return fmt.Errorf("%w: form ID %q must be 1 to %d characters from A-Z a-z 0-9 - _ . ~", ErrInvalidInput, f.ID, maxFormIDLen)
	}
	// Escaping never shortens a string: refuse what is too long as
	// given before scanning or encoding it.
	if n := len(f.Title) + len(f.Icon) + len(f.NotificationEmail); n > l.MaxFormBytes {
		return fmt.Errorf("%w: form title, icon and notificationEmail are %d bytes together, over the limit MaxFormBytes (%d) for the form as the API sends it",
			ErrInvalidInput, n, l.MaxFormBytes)
	}
	for _, fl := range []struct{ name, v string }{{"title", f.Title}, {"icon", f.Icon}, {"notificationEmail", f.NotificationEmail}} {
		if msg := badText(fl.v); msg != "" {
			return fmt.Errorf("%w: form %s %s", ErrInvalidInput, fl.name, msg)
		}
	}
	if err := checkTime(f.CreatedAt); err != nil {
		return err
	}
	b, err := appendForm(nil, *f)
	if err != nil {
		return fmt.Errorf("%w: form: %v", ErrInvalidInput, err)
	}
	if len(b) > l.MaxFormBytes {
		return fmt.Errorf("%w: form is %d bytes as the API sends it (escapes included), over the limit MaxFormBytes (%d)",
			ErrInvalidInput, len(b), l.MaxFormBytes)
	}
	return nil
}

// checkAccountID refuses an account ID that is empty, longer than
// MaxAccountIDBytes, not valid UTF-8 or holds a control character.
func (l Limits) checkAccountID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty account ID", ErrInvalidInput)
	}
	if len(id) > l.MaxAccountIDBytes {
		return fmt.Errorf("%w: account ID is %d bytes, over the limit MaxAccountIDBytes (%d)", ErrInvalidInput, len(id), l.MaxAccountIDBytes)
	}
	if msg := badText(id); msg != "" {
		return fmt.Errorf("%w: account ID %s", ErrInvalidInput, msg)
	}
	return nil
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

// maxSubmissionIDBytes bounds Metadata.ID: a handle, not data.
const maxSubmissionIDBytes = 256

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
