package formsapi

// The module-private store contract, as the handler uses it. It is
// declared once, in internal/storecontract: the methods this module's
// stores have beyond the public interfaces, and the handshake (Of) that
// tells such a store from a host's type that embeds one. Here it is
// instantiated with this package's types, and capabilitiesOf decides,
// once per handler, what the handler reads its store, feed and keys
// through: the one place the handler looks at what a store is.

import "github.com/formsapi/formsapi/internal/storecontract"

type (
	pageReader      = storecontract.Reader[Query]
	fastStore       = storecontract.Store[Query]
	formAuthorizer  = storecontract.FormAuthorizer[Grant]
	formsAuthorizer = storecontract.FormsAuthorizer[Grant, Query, Page[Form]]
)

// capabilities is what a handler reads through, decided once from the
// store, the feed (WithFeed's, or nil) and the keys it was given.
type capabilities struct {
	pages pageReader // reads pages of submissions: the store's fast path, or checked
	feed  pageReader // reads the sync feed; nil without one (501)
	// fields are the feed's fields (the CSV export's columns), when the
	// feed is a FieldStore; nil otherwise.
	fields FieldStore
	count  Counter       // counts lists for total=; nil without one (501)
	authz  KeyAuthorizer // keys as an authorizer, if it is one
	both   bool          // keys embeds a store: ask ResolveKey and Authorize both
	// formAuthz is keys when it is the store itself, with the combined
	// lookup of key and form (authorize.go); nil otherwise.
	formAuthz formAuthorizer
	feedForm  bool // the feed is read from formAuthz's store too
	// formsAuthz is formAuthz for the forms list: keys when it is the
	// store itself, with the version of the account's forms list read
	// with the key, and pages of forms read at it (authorize.go); nil
	// otherwise.
	formsAuthz formsAuthorizer
	// waiter wakes the feed's waiting requests (wait.go): the feed's
	// store, when it is one of this module's; nil otherwise, and then a
	// sync request's wait= is answered at once.
	waiter storecontract.Waiter
}

// capabilitiesOf decides how a handler reads store, feed and keys. It
// takes a part of the private contract only from one of this module's
// stores itself (storecontract.Of), never from a host's type that embeds
// one, which has the embedded store's methods promoted while its own may
// override any of them: such a type is read through the public
// interfaces it implements, and the optional ones (FeedStore, FieldStore,
// Counter) are taken from it only if it is not such a type either, since
// they too would be the embedded store's, answering past the overrides.
func capabilitiesOf(store Store, feed FeedStore, keys KeyResolver) capabilities {
	var c capabilities
	c.pages = checkedReader{store: store}
	if f, ok := storecontract.Of[fastStore](store); ok {
		c.pages = f
	}
	if feed == nil {
		if f, ok := store.(FeedStore); ok && !storecontract.Embeds(store) {
			feed = f
		}
	}
	switch f, ok := storecontract.Of[fastStore](feed); {
	case ok:
		c.feed = f
	case feed != nil:
		c.feed = checkedReader{feed: feed}
	}
	// The fields are those of the feed served.
	if f, ok := feed.(FieldStore); ok && !storecontract.Embeds(feed) {
		c.fields = f
	}
	if n, ok := store.(Counter); ok && !storecontract.Embeds(store) {
		c.count = n
	}
	c.authz, _ = keys.(KeyAuthorizer)
	c.both = c.authz != nil && storecontract.Embeds(keys)
	// The combined lookups take the key's form to the store: only when
	// keys is the store itself, so that a form found with the key is one
	// of the database the page is read from.
	if storecontract.Same(store, keys) {
		c.formAuthz, _ = keys.(formAuthorizer)
		c.formsAuthz, _ = keys.(formsAuthorizer)
	}
	c.waiter, _ = storecontract.Of[storecontract.Waiter](feed)
	// WithFeed may name another store, to which the form means nothing.
	c.feedForm = c.formAuthz != nil && storecontract.Same(feed, keys)
	return c
}
