package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/formsapi/formsapi"
)

// ErrInvalidEndpoint is wrapped by the error of an Endpoints call given
// something it refuses (a URL the egress policy does not allow, a form
// that is not the account's, an empty account, a reason too long); the
// call changed nothing.
var ErrInvalidEndpoint = errors.New("webhook: invalid endpoint")

// MaxForms bounds the forms one endpoint may list; an endpoint that
// follows every form of its account lists none.
const MaxForms = 100

// maxReason bounds a host's reason for disabling an endpoint, in bytes.
const maxReason = 500

// Endpoints is the host's API to register and manage the endpoints of
// its accounts, in a Store, against the forms of a Feed. It is safe for
// concurrent use.
type Endpoints struct {
	cfg   config
	store Store
	feed  Feed
	tok   tokens
}

// NewEndpoints returns the API over store, whose endpoints follow forms
// of feed. cursorSecret is the handler's, by which Replay reads the sync
// tokens the API gave: nil takes the one feed (or else store) keeps, as
// NewDispatcher does, and it panics as NewDispatcher does.
func NewEndpoints(store Store, feed Feed, cursorSecret []byte, opts ...Option) *Endpoints {
	return &Endpoints{cfg: newConfig(opts), store: store, feed: feed, tok: newTokens(secretOf(cursorSecret, feed, store))}
}

// Add registers rawURL to receive the events of accountID's forms: of
// those listed (each must be a form of the account), or of every form of
// the account, those created later included, when forms is empty. It
// draws the endpoint's ID and signing secret from crypto/rand and
// returns the endpoint: show its secret (Secrets[0].Secret.Reveal()) to
// its owner, who verifies deliveries with it.
//
// The endpoint receives what is committed from now on: each form's
// stream starts at the form's current end. A form created later starts
// at its beginning.
func (m *Endpoints) Add(ctx context.Context, accountID, rawURL string, forms []string) (Endpoint, error) {
	return m.AddFiltered(ctx, accountID, rawURL, forms, "")
}

// AddFiltered is Add with a filter (see ParseFilter; "" for none): the
// endpoint receives the additions of the submissions it matches, and
// the deletions of those it received (docs/webhooks.md, "Filtered
// endpoints"). A filter the submissions list would refuse is an error
// wrapping ErrInvalidEndpoint
// that names the clause, and adds nothing. The endpoint returned, and
// kept, has the filter's canonical text.
func (m *Endpoints) AddFiltered(ctx context.Context, accountID, rawURL string, forms []string, filter string) (Endpoint, error) {
	filter, err := ParseFilter(filter)
	if err != nil {
		return Endpoint{}, err
	}
	if accountID == "" || !utf8.ValidString(accountID) || len(accountID) > 256 {
		return Endpoint{}, fmt.Errorf("%w: the account ID must be 1 to 256 bytes of UTF-8", ErrInvalidEndpoint)
	}
	if _, err := m.cfg.egress.CheckURL(rawURL); err != nil {
		return Endpoint{}, fmt.Errorf("%w: %w", ErrInvalidEndpoint, err)
	}
	if len(forms) > MaxForms {
		return Endpoint{}, fmt.Errorf("%w: %d forms, more than %d (follow every form of the account with none)", ErrInvalidEndpoint, len(forms), MaxForms)
	}
	forms = slices.Compact(slices.Sorted(slices.Values(forms)))
	all := forms
	if len(forms) == 0 {
		var err error
		if all, err = accountForms(ctx, m.feed, accountID); err != nil {
			return Endpoint{}, fmt.Errorf("webhook: add endpoint: %w", err)
		}
	}
	streams := make([]Stream, 0, len(all))
	for _, f := range all {
		end, purged, inc, err := feedEnd(ctx, m.feed, accountID, f)
		if errors.Is(err, formsapi.ErrFormNotFound) {
			return Endpoint{}, fmt.Errorf("%w: %q is not a form of the account", ErrInvalidEndpoint, f)
		}
		if err != nil {
			return Endpoint{}, fmt.Errorf("webhook: add endpoint: %w", err)
		}
		streams = append(streams, Stream{FormID: f, Incarnation: inc, Cursor: end, Floor: max(end, purged), Unsent: end})
	}
	secret, err := NewSecret()
	if err != nil {
		return Endpoint{}, err
	}
	id, err := newEndpointID()
	if err != nil {
		return Endpoint{}, err
	}
	e := Endpoint{ID: id, AccountID: accountID, URL: rawURL, Forms: forms, Filter: filter, Secrets: []EndpointSecret{{Secret: secret}}, CreatedAt: m.cfg.now()}
	if err := m.store.AddEndpoint(ctx, e, streams); err != nil {
		return Endpoint{}, fmt.Errorf("webhook: add endpoint: %w", err)
	}
	return e, nil
}

// newEndpointID returns "ep_" and 22 characters from crypto/rand.
func newEndpointID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook: new endpoint ID: %w", err)
	}
	return "ep_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// feedEnd returns the position of the last entry of form's feed (0 for
// none), the feed's Purged and the form's incarnation as its first page
// gave it (0: not known). A form created again during the walk leaves the
// incarnation of the first page with the position of the new form: the
// dispatcher then starts the stream over at the new form's start, as for
// a form created after the endpoint (see Dispatcher).
func feedEnd(ctx context.Context, feed Feed, accountID, form string) (end, purged int64, inc uint64, err error) {
	for first := true; ; first = false {
		p, err := feed.SyncSubmissions(ctx, accountID, form, end, 1000)
		if err != nil {
			return 0, 0, 0, err
		}
		if first {
			inc = p.Incarnation
		}
		end, purged = p.Next, p.Purged
		if !p.More {
			return end, purged, inc, nil
		}
	}
}

// List returns the endpoints of accountID, oldest first.
func (m *Endpoints) List(ctx context.Context, accountID string) ([]Endpoint, error) {
	return m.store.Endpoints(ctx, accountID)
}

// Get returns an endpoint of accountID and the delivery state of each
// form it has delivered or tried to: a Stream with Resync set stopped
// at the feed's retention, one with Attempts above 0 is retrying.
func (m *Endpoints) Get(ctx context.Context, accountID, id string) (Endpoint, []Stream, error) {
	return m.store.Endpoint(ctx, accountID, id)
}

// Delete removes an endpoint and its delivery state; a dispatcher
// sending to it stops at its next write.
func (m *Endpoints) Delete(ctx context.Context, accountID, id string) error {
	return m.store.DeleteEndpoint(ctx, accountID, id)
}

// Disable stops deliveries to an endpoint, with reason (at most 500
// bytes) for whoever lists it. It does not wait for attempts in flight:
// those end as they would, and no attempt starts later than a
// dispatcher's poll interval after Disable returns, whatever the
// backlog. Its cursors stay: Enable resumes where it stopped, and
// nothing committed meanwhile is missed.
func (m *Endpoints) Disable(ctx context.Context, accountID, id, reason string) error {
	if len(reason) > maxReason || !utf8.ValidString(reason) {
		return fmt.Errorf("%w: the reason must be at most %d bytes of UTF-8", ErrInvalidEndpoint, maxReason)
	}
	_, err := m.store.UpdateEndpoint(ctx, accountID, id, func(e *Endpoint) error {
		e.Disabled, e.DisabledReason, e.DisabledAt = true, reason, m.cfg.now()
		return nil
	})
	return err
}

// Enable resumes deliveries to a disabled endpoint (by the host, or by
// the dispatcher after a 410 or five days of failures) from each form's
// cursor: the entry that was failing is tried at once, and the five days
// count again from its next failure.
func (m *Endpoints) Enable(ctx context.Context, accountID, id string) error {
	e, streams, err := m.store.Endpoint(ctx, accountID, id)
	if err != nil {
		return err
	}
	if !e.Disabled {
		return nil
	}
	for _, st := range streams {
		if st.Attempts > 0 || !st.FailingSince.IsZero() {
			st.Attempts, st.NextAt, st.FailingSince = 0, time.Time{}, time.Time{}
			if err := m.store.ResetStream(ctx, accountID, id, st); err != nil {
				return err
			}
		}
	}
	_, err = m.store.UpdateEndpoint(ctx, accountID, id, func(e *Endpoint) error {
		e.Disabled, e.DisabledReason, e.DisabledAt = false, "", time.Time{}
		return nil
	})
	return err
}

// SetFilter changes an endpoint's filter (see ParseFilter; "" removes
// it) and returns the endpoint as stored, with the filter's canonical
// text. The new filter applies from each form's cursor on: every attempt
// that starts more than a dispatcher's poll interval after SetFilter
// returns is of an addition it matches (an entry that was failing, and
// that it does not match, is passed over), while what was delivered
// stays delivered and is not sent again. A deletion is delivered if its
// submission's addition was, under whichever filter was in force when
// the cursor passed it (docs/webhooks.md, "Filtered endpoints"). A filter the
// submissions list would refuse is an error wrapping ErrInvalidEndpoint
// that names the clause, and changes nothing.
func (m *Endpoints) SetFilter(ctx context.Context, accountID, id, filter string) (Endpoint, error) {
	filter, err := ParseFilter(filter)
	if err != nil {
		return Endpoint{}, err
	}
	return m.store.UpdateEndpoint(ctx, accountID, id, func(e *Endpoint) error {
		e.Filter = filter
		return nil
	})
}

// RotateSecret gives an endpoint a new signing secret, drawn from
// crypto/rand, and returns it. Every attempt that starts more than a
// dispatcher's poll interval after it returns is signed with it and, for
// overlap (which may be 0), with the secrets that were live: a receiver
// that still holds an old one keeps verifying until it switches. Within
// the poll interval an attempt may still be signed as before. Secrets
// whose overlap ended are dropped.
func (m *Endpoints) RotateSecret(ctx context.Context, accountID, id string, overlap time.Duration) (Secret, error) {
	if overlap < 0 {
		return Secret{}, fmt.Errorf("%w: a negative overlap", ErrInvalidEndpoint)
	}
	secret, err := NewSecret()
	if err != nil {
		return Secret{}, err
	}
	now := m.cfg.now()
	until := now.Add(overlap)
	_, err = m.store.UpdateEndpoint(ctx, accountID, id, func(e *Endpoint) error {
		kept := []EndpointSecret{{Secret: secret}}
		for _, s := range e.Secrets {
			if !s.Until.IsZero() && !s.Until.After(now) {
				continue // its overlap ended
			}
			if s.Until.IsZero() || s.Until.After(until) {
				s.Until = until
			}
			if overlap > 0 {
				kept = append(kept, s)
			}
		}
		e.Secrets = kept
		return nil
	})
	if err != nil {
		return Secret{}, err
	}
	return secret, nil
}

// Replay sends a form's entries again, from the first one committed
// after the sync token (one the API gave for this form, with the
// account's key) to the feed's end, in order, then goes on with what
// follows: entries the endpoint already got come again with the same
// webhook-id and body, and entries never attempted come too. A token
// older than the feed's tombstone retention stops the form for a
// resync at once, as the feed would answer it 410. An empty token
// replays the whole feed, as a resync does. A token of a form deleted
// since, whose ID a new form took, is refused (ErrInvalidEndpoint), as
// the feed answers it 410: replay the new form from the start.
func (m *Endpoints) Replay(ctx context.Context, accountID, id, formID, syncToken string) error {
	pos, inc := int64(0), uint64(0)
	if syncToken != "" {
		s, ok := m.tok.openSync(accountID, formID, syncToken)
		if !ok {
			return fmt.Errorf("%w: not a sync token of this form's feed", ErrInvalidEndpoint)
		}
		pos, inc = s.Pos, s.Incarnation
	}
	return m.rewind(ctx, accountID, id, formID, pos, inc)
}

// ReplaySince sends a form's entries again from the first submission,
// in commit order, whose createdAt is at or after since (the deletions
// committed after it included) to the feed's end, as Replay does. It
// reads the feed from its start to find that submission.
func (m *Endpoints) ReplaySince(ctx context.Context, accountID, id, formID string, since time.Time) error {
	var after int64
	var inc uint64 // of the walk's first page
	for first := true; ; first = false {
		p, err := m.feed.SyncSubmissions(ctx, accountID, formID, after, 1000)
		if err != nil {
			return fmt.Errorf("webhook: replay: %w", err)
		}
		if first {
			inc = p.Incarnation
		}
		for i, s := range p.Items {
			if !s.CreatedAt.Before(since) {
				return m.rewind(ctx, accountID, id, formID, p.Positions[i]-1, inc)
			}
		}
		after = p.Next
		if !p.More {
			return m.rewind(ctx, accountID, id, formID, after, inc)
		}
	}
}

// rewind moves the stream of formID back to pos, a position of the
// form's incarnation inc (0: not known, as in a sync token of an earlier
// version: the dispatcher then takes the form's), ending any lease on the
// endpoint so that no dispatcher writes over it. A position of another
// incarnation than the form's is refused.
func (m *Endpoints) rewind(ctx context.Context, accountID, id, formID string, pos int64, inc uint64) error {
	e, streams, err := m.store.Endpoint(ctx, accountID, id)
	if err != nil {
		return err
	}
	if len(e.Forms) > 0 && !slices.Contains(e.Forms, formID) {
		return fmt.Errorf("%w: the endpoint does not follow form %q", ErrInvalidEndpoint, formID)
	}
	p, err := m.feed.SyncSubmissions(ctx, accountID, formID, 0, 1)
	if err != nil {
		return fmt.Errorf("webhook: replay: %w", err)
	}
	if !sameIncarnation(inc, p.Incarnation) {
		return fmt.Errorf("%w: a position of a form deleted since, whose ID a new form took: replay the form from the start", ErrInvalidEndpoint)
	}
	if pos == 0 {
		inc = p.Incarnation // the start of any incarnation is the form's
	}
	st := Stream{FormID: formID, Incarnation: inc, Cursor: pos, Floor: p.Purged}
	for _, old := range streams {
		if old.FormID == formID && pos > 0 && sameIncarnation(old.Incarnation, inc) {
			st.Floor = old.Floor // the receiver's copy is the one it had
			// And so are the verdicts on what it was sent: the additions
			// replayed are sent again (those up to Unsent for the first
			// time: the dispatcher turns the positions from the cursor to
			// Unsent into a span first, so that those its filter passes
			// over stay unsent), the deletions after pos of those it was
			// sent come again. From the start, the stream judges afresh.
			st.Judging, st.Unsent, st.Judged = old.Judging, old.Unsent, old.Judged
		}
	}
	return m.store.ResetStream(ctx, accountID, id, st)
}
