package formsapi

import (
	"fmt"
	"reflect"
	"strings"
)

// The derivations capabilitiesOf replaced (issue 40), as they stood at
// de87cca^ in handler.go (readers, newAPI), authorize.go (combinedLookup,
// combinedFormsLookup, sameStore) and lists.go (fastPathOf, embedsStore),
// kept here so that TestCapabilitiesAsBefore can hold the one function
// to what they decided, for every kind of store, feed and keys.

func beforeFastPathOf(v any) (fastStore, bool) {
	f, ok := v.(fastStore)
	if !ok || f.FastPath().Store != v {
		return nil, false
	}
	return f, true
}

func beforeEmbedsStore(v any) bool {
	f, ok := v.(fastStore)
	return ok && f.FastPath().Store != v
}

func beforeReaders(store Store, feed FeedStore) (pages, feeds pageReader, fields FieldStore) {
	pages = checkedReader{store: store}
	if f, ok := beforeFastPathOf(store); ok {
		pages = f
	}
	if feed == nil {
		if f, ok := store.(FeedStore); ok && !beforeEmbedsStore(store) {
			feed = f
		}
	}
	switch f, ok := beforeFastPathOf(feed); {
	case ok:
		feeds = f
	case feed != nil:
		feeds = checkedReader{feed: feed}
	}
	if f, ok := feed.(FieldStore); ok && !beforeEmbedsStore(feed) {
		fields = f
	}
	return pages, feeds, fields
}

func beforeSameStore(store Store, keys KeyResolver) bool {
	s, ok1 := beforeFastPathOf(store)
	k, ok2 := beforeFastPathOf(keys)
	return ok1 && ok2 && s.FastPath().Store == k.FastPath().Store
}

func beforeCapabilities(store Store, feed FeedStore, keys KeyResolver) capabilities {
	var c capabilities
	c.pages, c.feed, c.fields = beforeReaders(store, feed)
	if n, ok := store.(Counter); ok && !beforeEmbedsStore(store) {
		c.count = n
	}
	c.authz, _ = keys.(KeyAuthorizer)
	c.both = c.authz != nil && beforeEmbedsStore(keys)
	if f, ok := keys.(formsAuthorizer); ok && beforeSameStore(store, keys) {
		c.formsAuthz = f
	}
	if f, ok := keys.(formAuthorizer); ok && beforeSameStore(store, keys) {
		c.formAuthz = f
		fs, ok := c.feed.(fastStore)
		c.feedForm = ok && fs.FastPath().Store == c.formAuthz.(fastStore).FastPath().Store
	}
	return c
}

// Capabilities describes what a handler over store, feed (WithFeed's, or
// nil) and keys reads through, as capabilitiesOf decides it (now) and as
// the derivations it replaced decided it (before).
func Capabilities(store Store, feed FeedStore, keys KeyResolver) (now, before string) {
	return describeCapabilities(capabilitiesOf(store, feed, keys)), describeCapabilities(beforeCapabilities(store, feed, keys))
}

func describeCapabilities(c capabilities) string {
	reader := func(r pageReader) string {
		switch r := r.(type) {
		case nil:
			return "none"
		case checkedReader:
			return "checked(store=" + identity(r.store) + " feed=" + identity(r.feed) + ")"
		default:
			return "fast(" + identity(r) + ")"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pages=%s feed=%s fields=%s count=%s authz=%s both=%t formAuthz=%s formsAuthz=%s feedForm=%t",
		reader(c.pages), reader(c.feed), identity(c.fields), identity(c.count), identity(c.authz), c.both,
		identity(c.formAuthz), identity(c.formsAuthz), c.feedForm)
	return b.String()
}

// identity names v by its dynamic type and, where it has one, the
// address it holds, without comparing it (a host's value may not be
// comparable).
func identity(v any) string {
	if v == nil {
		return "nil"
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return fmt.Sprintf("%T@%x", v, rv.Pointer())
	case reflect.Struct:
		s := fmt.Sprintf("%T{", v)
		for i := 0; i < rv.NumField(); i++ {
			f := rv.Field(i)
			if f.Kind() == reflect.Interface && !f.IsNil() {
				f = f.Elem()
			}
			if f.Kind() == reflect.Pointer {
				s += fmt.Sprintf("@%x", f.Pointer())
			}
		}
		return s + "}"
	}
	return fmt.Sprintf("%T", v)
}
