package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/formsapi/formsapi"
)

// The lifecycle subcommands: -delete and -erase change the data, as the
// host's own code would through formsapi.Writer, and print the curl lines
// that show the change in the sync feed, where a deleted submission's ref
// moves to "deleted". Like -new-key they run against the database and
// exit; a server running over the same database sees the change on its
// next request.

// maxFeedLines bounds the curl lines -erase prints, one per form of the
// account.
const maxFeedLines = 10

// parseDelete splits -delete's FORM/ID.
func parseDelete(arg string) (formID, id string, err error) {
	formID, id, ok := strings.Cut(arg, "/")
	if !ok || formID == "" || id == "" {
		return "", "", fmt.Errorf("-delete %q: want FORM/ID, the form's ID and the submission's (contact/contact-2)", arg)
	}
	return formID, id, nil
}

// parseErase splits -erase's FIELD=VALUE.
func parseErase(arg string) (field, value string, err error) {
	field, value, ok := strings.Cut(arg, "=")
	if !ok || field == "" || value == "" {
		return "", "", fmt.Errorf("-erase %q: want FIELD=VALUE, a top-level field of the data and the string it holds (email=ada@example.com)", arg)
	}
	return field, value, nil
}

// feedLines writes the curl lines that read the sync feed of each form
// from its start, where a deletion shows its ref under "deleted".
func feedLines(w io.Writer, base, auth string, formIDs ...string) {
	for _, f := range formIDs {
		fmt.Fprintf(w, "  curl -H %s '%s/v1/forms/%s/submissions?sync=start'\n", auth, base, f)
	}
}

// deleteSubmission deletes the submission arg (FORM/ID) of account and
// says how to see it in the feed.
func deleteSubmission(ctx context.Context, store backend, account, arg string, w io.Writer, base, auth string) error {
	formID, id, err := parseDelete(arg)
	if err != nil {
		return err
	}
	err = store.DeleteSubmission(ctx, account, formID, id)
	switch {
	case errors.Is(err, formsapi.ErrFormNotFound):
		return fmt.Errorf("-delete: account %q has no form %q", account, formID)
	case errors.Is(err, formsapi.ErrSubmissionNotFound):
		return fmt.Errorf("-delete: form %q has no submission %q (the demo's are %s-1, %s-2, …; a database seeded by an earlier version of this server has no IDs: delete it to seed again)", formID, id, formID, formID)
	case err != nil:
		return fmt.Errorf("-delete: %w", err)
	}
	fmt.Fprintf(w, "deleted submission %q of form %q (account %q)\n", id, formID, account)
	fmt.Fprintf(w, "the sync feed lists its ref under \"deleted\" now, and no longer under \"refs\":\n")
	feedLines(w, base, auth, formID)
	return nil
}

// erase deletes every submission of account whose data holds arg
// (FIELD=VALUE) and says how to see it in the feeds.
func erase(ctx context.Context, store backend, account, arg string, w io.Writer, base, auth string) error {
	field, value, err := parseErase(arg)
	if err != nil {
		return err
	}
	n, err := store.Erase(ctx, account, field, value)
	if err != nil {
		return fmt.Errorf("-erase: %w", err)
	}
	if n == 0 {
		fmt.Fprintf(w, "erased nothing: no submission of account %q has %q = %q (compared exactly, at the top level of its data)\n", account, field, value)
		return nil
	}
	fmt.Fprintf(w, "erased %d submissions of account %q whose %q is %q\n", n, account, field, value)
	forms, err := store.ListForms(ctx, account, formsapi.Query{Limit: maxFeedLines, Order: formsapi.Oldest})
	if err != nil {
		return fmt.Errorf("-erase: list the account's forms: %w", err)
	}
	var ids []string
	for _, f := range forms.Items {
		ids = append(ids, f.ID)
	}
	fmt.Fprintf(w, "the sync feeds of the account's forms list their refs under \"deleted\" now:\n")
	feedLines(w, base, auth, ids...)
	return nil
}

// serverURL is the URL of a server listening on addr, for the curl lines
// of a subcommand, which does not listen itself.
func serverURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
