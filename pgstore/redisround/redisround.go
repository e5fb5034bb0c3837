// Package redisround is a [pgstore.RoundExchange] over Redis, for nodes
// that share their rounds (pgstore.WithSharedRounds; docs/fleet.md,
// "Rounds shared between the nodes"): the leader lease is a key with a
// TTL, the tickets a counter (INCR), and the rounds published and the
// tickets' wake-ups go to every node by pub/sub. What pub/sub loses (a
// node not subscribed, a connection dropped) a node sees as a gap, and
// runs a round of its own: the exactness of the nodes' answers never
// depends on Redis.
//
// Every node of one fleet must use the same Redis and prefix; the keys
// are the prefix followed by "lease", "tickets" and "woken", and the channels the
// prefix followed by "rounds" and "wake". It needs Redis 5 or later,
// standalone or with Sentinel (a cluster needs the prefix to hold a hash
// tag, "{...}", so that the keys share a slot). Redis carries what the
// rounds read, submissions' JSON included (pub/sub: not stored), and a
// node applies what it receives: give the nodes a Redis no one else can
// publish to.
//
// The host owns the client (go-redis): the exchange never closes it.
// pgstore does not import go-redis; this package, redislimit and the
// example server do.
package redisround

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi/pgstore"
)

// DefaultPrefix starts the name of every key and channel of an exchange
// unless [WithPrefix] sets another.
const DefaultPrefix = "formsapi:rounds:"

// DefaultLease is how long the leader's lease lasts past its last
// renewal unless [WithLease] sets another: three of pgstore's
// DefaultLeaseRenew.
const DefaultLease = 3 * pgstore.DefaultLeaseRenew

// Exchange is a [pgstore.RoundExchange] over Redis for one node: make
// one per node (each has its own identity in the lease). It is safe for
// concurrent use.
type Exchange struct {
	client redis.UniversalClient
	prefix string
	lease  time.Duration
	id     string
}

var _ pgstore.RoundExchange = (*Exchange)(nil)

// Option configures an [Exchange] made by [New].
type Option func(*Exchange)

// WithPrefix sets the string that starts every key and channel of the
// exchange ([DefaultPrefix] unless set): nodes share rounds only with
// the nodes of the same prefix.
func WithPrefix(prefix string) Option {
	return func(x *Exchange) { x.prefix = prefix }
}

// WithLease sets how long the leader's lease lasts past its last renewal
// ([DefaultLease] unless set): a leader that has gone is replaced at most
// that long plus a renewal later, and its followers meanwhile wait for a
// published round up to pgstore's share wait per round, then run their
// own. It must be longer than the nodes' renewal interval
// (pgstore.WithLeaseRenew).
func WithLease(d time.Duration) Option {
	return func(x *Exchange) { x.lease = d }
}

// New returns an exchange over client for one node. It sends nothing
// until the store campaigns. It panics if client is nil.
func New(client redis.UniversalClient, opts ...Option) *Exchange {
	if client == nil {
		panic("redisround: New(nil)")
	}
	x := &Exchange{client: client, prefix: DefaultPrefix, lease: DefaultLease, id: rand.Text()}
	for _, o := range opts {
		o(x)
	}
	return x
}

func (x *Exchange) key(name string) string { return x.prefix + name }

// campaign takes the lease (KEYS[1]) for ARGV[1] for ARGV[2] ms when no
// one holds it, or renews it when ARGV[1] does; 1 when ARGV[1] holds it.
// A node that takes the lease clears the wake-up flag (KEYS[2]; see
// ticket), which a leader gone may have left set.
var campaign = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('DEL', KEYS[2])
  return 1
end
return 0`)

// resign deletes the lease (KEYS[1]) if ARGV[1] holds it.
var resign = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// ticket takes the next ticket (KEYS[1]), wakes the leader (channel
// KEYS[3]) unless a wake-up is already due (the flag KEYS[4], set for at
// most ARGV[1] ms, which the leader clears as it reads the tickets), and
// says whether a lease (KEYS[2]) is held: one wake-up per leader's round
// at most, whatever the tickets.
var ticket = redis.NewScript(`
local t = redis.call('INCR', KEYS[1])
if redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[1]) then
  redis.call('PUBLISH', KEYS[3], '')
end
return {t, redis.call('EXISTS', KEYS[2])}`)

// tickets clears the wake-up flag (KEYS[2]) and returns the last ticket
// taken (KEYS[1]): a ticket taken after it wakes the leader again.
var tickets = redis.NewScript(`
redis.call('DEL', KEYS[2])
return tonumber(redis.call('GET', KEYS[1]) or '0')`)

// Campaign implements [pgstore.RoundExchange].
func (x *Exchange) Campaign(ctx context.Context) (bool, error) {
	n, err := campaign.Run(ctx, x.client, []string{x.key("lease"), x.key("woken")}, x.id, x.lease.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("redisround: campaign: %w", err)
	}
	return n == 1, nil
}

// Resign implements [pgstore.RoundExchange].
func (x *Exchange) Resign(ctx context.Context) error {
	if err := resign.Run(ctx, x.client, []string{x.key("lease")}, x.id).Err(); err != nil {
		return fmt.Errorf("redisround: resign: %w", err)
	}
	return nil
}

// Ticket implements [pgstore.RoundExchange]: one script run. It wakes
// the leader only when no wake-up is due since the leader last read the
// tickets, so that the leader and the nodes get one wake-up per round,
// not one per ticket.
func (x *Exchange) Ticket(ctx context.Context) (int64, bool, error) {
	v, err := ticket.Run(ctx, x.client, []string{x.key("tickets"), x.key("lease"), x.key("wake"), x.key("woken")}, x.lease.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("redisround: ticket: %w", err)
	}
	if len(v) != 2 {
		return 0, false, errors.New("redisround: ticket: an answer not of two numbers")
	}
	return v[0], v[1] == 1, nil
}

// Tickets implements [pgstore.RoundExchange]: it also clears the flag
// that spares the leader a wake-up per ticket (see Ticket).
func (x *Exchange) Tickets(ctx context.Context) (int64, error) {
	t, err := tickets.Run(ctx, x.client, []string{x.key("tickets"), x.key("woken")}).Int64()
	if err != nil {
		return 0, fmt.Errorf("redisround: tickets: %w", err)
	}
	return t, nil
}

// Publish implements [pgstore.RoundExchange].
func (x *Exchange) Publish(ctx context.Context, round []byte) error {
	if err := x.client.Publish(ctx, x.key("rounds"), round).Err(); err != nil {
		return fmt.Errorf("redisround: publish: %w", err)
	}
	return nil
}

// Listen implements [pgstore.RoundExchange]: a subscription of its own
// (a connection held while it lasts) to the two channels.
func (x *Exchange) Listen(ctx context.Context, subscribed func(), round func([]byte), wake func()) error {
	rounds, wakes := x.key("rounds"), x.key("wake")
	ps := x.client.Subscribe(ctx, rounds, wakes)
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { ps.Close() }) // ends a Receive in progress
	defer stop()
	for n := 0; n < 2; {
		m, err := ps.Receive(ctx)
		if err != nil {
			return fmt.Errorf("redisround: subscribe: %w", err)
		}
		if _, ok := m.(*redis.Subscription); ok {
			n++
		}
	}
	subscribed()
	for {
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("redisround: listen: %w", err)
		}
		switch m.Channel {
		case rounds:
			round([]byte(m.Payload))
		case wakes:
			wake()
		}
	}
}
