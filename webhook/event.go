package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/formsapi/formsapi"
)

// The event types a delivery's body names in "type".
const (
	// EventCreated: a submission was added to a form. Its data holds
	// formId, the submission's ref and the submission exactly as the
	// read API returns it; or, above MaxSubmissionBytes, thin: true and
	// a url to fetch it.
	EventCreated = "submission.created"
	// EventDeleted: a submission was deleted or erased. Its data holds
	// formId and the ref the submission had: the ref the feed's deleted
	// list gives, and its submission.created event carried.
	EventDeleted = "submission.deleted"
)

// MaxSubmissionBytes is the largest submission, as the API encodes it,
// that a submission.created event carries whole: 256 KiB. A larger one is
// sent thin, with the URL of a feed page that holds it alone, never cut.
const MaxSubmissionBytes = 256 << 10

// entry is one entry of a form's feed: an addition or a deletion.
type entry struct {
	pos int64 // the entry's own feed position
	// A deletion names the position of the submission it deleted.
	deleted bool
	of      int64
	sub     formsapi.Submission
}

// entries returns the entries of p in commit order, or ok false when p
// holds deletions whose own positions the store did not give (a host's
// store that leaves FeedPage.DeletedAt empty): then only the first entry
// can be placed, by reading it alone.
func entries(p formsapi.FeedPage) (out []entry, ok bool) {
	if len(p.Deleted) > 0 && len(p.DeletedAt) != len(p.Deleted) {
		return nil, false
	}
	out = make([]entry, 0, len(p.Items)+len(p.Deleted))
	for i, s := range p.Items {
		out = append(out, entry{pos: p.Positions[i], sub: s})
	}
	for i, of := range p.Deleted {
		out = append(out, entry{pos: p.DeletedAt[i], deleted: true, of: of})
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.pos, b.pos) })
	return out, true
}

// event is one delivery's content, the same on every attempt but for
// attachments' URLs that WithAttachmentURLs signs for each attempt.
type event struct {
	typ  string
	id   string // webhook-id: MessageID(typ, ref)
	body []byte
	// thin reports a submission.created sent without the submission.
	thin bool
}

// eventOf returns the event of entry x of formID's feed: ref is the ref
// of the submission it concerns, thinURL the URL of a feed page holding
// that submission alone (for one too large to carry).
func eventOf(formID string, x entry, ref, thinURL string) (event, error) {
	ev := event{typ: EventCreated}
	if x.deleted {
		ev.typ = EventDeleted
	}
	ev.id = MessageID(ev.typ, ref)
	b := make([]byte, 0, 256)
	b = append(b, `{"type":`...)
	b = appendJSONString(b, ev.typ)
	b = append(b, `,"data":{"formId":`...)
	b = appendJSONString(b, formID)
	b = append(b, `,"ref":`...)
	b = appendJSONString(b, ref)
	if !x.deleted {
		sub, err := formsapi.AppendSubmissionJSON(nil, x.sub)
		if err != nil {
			return event{}, fmt.Errorf("encode the submission at feed position %d: %w", x.pos, err)
		}
		if len(sub) > MaxSubmissionBytes {
			ev.thin = true
			b = append(b, `,"thin":true,"url":`...)
			b = appendJSONString(b, thinURL)
		} else {
			b = append(b, `,"submission":`...)
			b = append(b, sub...)
		}
	}
	ev.body = append(b, "}}"...)
	return ev, nil
}

// appendJSONString appends s as a JSON string, with <, > and & as they
// are (a URL's & stays readable).
func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// thinURL returns the URL of the feed page of formID that holds the
// submission at pos alone: the page after pos-1, of one entry, under
// base (the API's public URL, such as https://api.example.com/api).
func thinURL(base, formID, token string) string {
	return base + "/v1/forms/" + url.PathEscape(formID) + "/submissions?sync=" + url.QueryEscape(token) + "&limit=1"
}

// signAttachments returns a copy of atts, of a submission of formID of
// account, with each URL sign made of it as of at (WithAttachmentURLs).
func signAttachments(ctx context.Context, sign formsapi.AttachmentSigner, account, formID string, atts []formsapi.Attachment, at time.Time) ([]formsapi.Attachment, error) {
	out := slices.Clone(atts)
	for i, a := range atts {
		u, err := sign(ctx, account, formID, a, at)
		if err != nil {
			return nil, fmt.Errorf("sign attachment %d: %w", i, err)
		}
		out[i].FileURL = u
	}
	return out, nil
}
