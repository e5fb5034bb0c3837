package observe

import (
	"context"
	"time"
)

// DeliveryObserver receives what a webhook dispatcher (package webhook)
// does, for metrics: each attempt to deliver an event, and each change of
// an endpoint's state the dispatcher makes. Its methods are called from
// many goroutines at once and must be safe for concurrent use; they run
// on the delivery's path and should return quickly. Like [Observer], it
// learns IDs (account, form, endpoint) that an adapter keeps out of
// metric labels unless its host opts in; it never learns an endpoint's
// URL, a secret or an event's body.
type DeliveryObserver interface {
	// Attempt is called once per attempt, after its answer (or its
	// failure) is known and before the cursor moves.
	Attempt(ctx context.Context, a Attempt)
	// EndpointChanged is called when the dispatcher disables an endpoint
	// or stops one of its forms for a resync.
	EndpointChanged(ctx context.Context, c EndpointChange)
}

// Attempt is one attempt to deliver an event.
type Attempt struct {
	// Outcome is the attempt's class: "success" (2xx), "redirect",
	// "client_error", "gone" (410), "throttled" (429), "server_error",
	// "timeout" or "network" (webhook.Outcome).
	Outcome string
	// Retry is true for every attempt of an event but its first.
	Retry bool
	// Duration is the attempt's time, from sending to the answer's end.
	Duration time.Duration
	// EventType is "submission.created" or "submission.deleted".
	EventType string
	// MessageID is the event's webhook-id, the same on each of its
	// attempts: for logs and tests that follow one event, never for a
	// metric label (every event would make a series).
	MessageID string
	// Lag, for a successful attempt of a submission.created, is the time
	// from the submission's createdAt (its commit, for a store that sets
	// it) to the 2xx; 0 otherwise.
	Lag time.Duration
	// LagPositions, for a successful attempt, is how many feed positions
	// lay between the entry delivered and the last entry the dispatcher
	// had read of the form: the endpoint's backlog, at least.
	LagPositions int64
	// AccountID, FormID and EndpointID name the event's account, form and
	// endpoint.
	AccountID, FormID, EndpointID string
}

// EndpointChange is a change of an endpoint's state by the dispatcher.
type EndpointChange struct {
	// State is "disabled" (the endpoint gets nothing until the host
	// enables it), "resync" (one form stopped: its cursor fell behind
	// the feed's tombstone retention) or "restart" (one form's stream
	// started over at the form's first entry).
	State string
	// Reason is why: "gone" (the endpoint answered 410), "failing" (no
	// success for five days), "filter" (its stored filter is not one
	// this version reads), "retention" (for a resync) or "recreated"
	// (for a restart: the form was deleted and created again with the
	// same ID).
	Reason string
	// AccountID and EndpointID name the endpoint; FormID the form of a
	// resync or a restart, "" otherwise.
	AccountID, EndpointID, FormID string
}
