// Package webhook pushes a form's feed to URLs its account registered, as
// signed webhooks on the Standard Webhooks 1.0 wire, and gives receivers
// written in Go the function that checks them.
//
// # The wire
//
// Every delivery is an HTTP POST whose body is byte-identical on every
// attempt, with three headers (see [Sign]):
//
//   - webhook-id ([HeaderID]): the event's identity, the same on every
//     attempt and on every endpoint; [MessageID] derives it from the
//     event's type and the feed's ref of its submission, so a receiver
//     de-duplicates by it.
//   - webhook-timestamp ([HeaderTimestamp]): the attempt's time, in Unix
//     seconds; a retry has a new one.
//   - webhook-signature ([HeaderSignature]): "v1," and the base64
//     HMAC-SHA256 of "id.timestamp.body" under the endpoint's [Secret];
//     during a secret's rotation, one such signature per secret, separated
//     by spaces, so that a receiver holding either secret verifies it.
//
// Secrets are "whsec_" and the standard base64 of 24 to 64 random bytes
// ([NewSecret] draws 32 from crypto/rand; [ParseSecret] reads one back).
// A [Secret] never prints itself: fmt and log/slog show it redacted, and
// [Secret.Reveal] is the one way to its text.
//
// # Receiving
//
// [Verify] (or a [Verifier], for a clock of its own or another tolerance)
// checks a delivery from its raw body and headers: a signature made with
// one of the receiver's secrets, and a timestamp within 5 minutes of now,
// past or future, so a captured delivery cannot be replayed later. Its
// errors are sentinels for errors.Is. docs/webhooks.md shows the same check
// in Node and Python.
//
// # Where deliveries may go
//
// An [Egress] is the outbound policy, used both when an endpoint's URL is
// saved ([Egress.CheckURL]) and on every attempt ([Egress.Client]): https
// on port 443 to a host name or public IP address, and plain http (port
// 80) or loopback receivers only when the host sets the Egress's
// AllowHTTP or AllowLoopback, a value it passes, never a process-wide
// switch. The client's dialer refuses private, loopback, link-local,
// shared (CGNAT), multicast, documentation, unspecified, NAT64, 6to4,
// Teredo and IPv4-mapped forms of those at connect time, on the address
// the name resolved to for that very connection, so DNS that answers
// differently the second time gains nothing; it ignores proxy settings
// from the environment (Go does not run a dialer's check on a proxied
// request) and follows no redirect: a 3xx is a failed attempt.
//
// # Endpoints and delivery
//
// Endpoints kept by the stores, the dispatcher that reads each endpoint's
// forms' feeds after a durable cursor and sends them in commit order, its
// retries, recovery and metrics: documented with their types.
package webhook
