// Package wire carries pages the library's own stores have already encoded
// as the API sends them. The handler's fast path takes a *Page; since the
// type is internal, only stores in this module can offer that path, and a
// host's store always goes through the checked formsapi.Store path.
package wire

// Page is a page of submissions being appended to a response body.
type Page struct {
	// Body is the response being built. A store appends each submission's
	// JSON object to it, separated by commas, after what is already there.
	Body []byte
	// NextCursor is the store's cursor after this page, "" at the end.
	NextCursor string
}
