package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/webhook"
)

// webhookFlags are the flags of webhooks: run a dispatcher beside the
// API, or add or list an account's endpoints and exit, the way -new-key
// issues a key.
type webhookFlags struct {
	run      bool
	add      string
	list     string
	url      string
	forms    string
	filter   string
	loopback bool
	poll     time.Duration
	timeout  time.Duration
	scale    float64
	apiBase  string
	signer   formsapi.AttachmentSigner // from -attachment-secret-file, or nil
}

func addWebhookFlags(fs *flag.FlagSet) *webhookFlags {
	w := &webhookFlags{}
	fs.BoolVar(&w.run, "webhooks", false, "run a webhook dispatcher beside the API: it delivers the events of every endpoint it claims (any number of nodes may run one over the same database)")
	fs.StringVar(&w.add, "new-endpoint", "", "register a webhook endpoint (-endpoint-url) for this account, print its ID and signing secret once and exit")
	fs.StringVar(&w.list, "list-endpoints", "", "list the webhook endpoints of this account, with each form's delivery state, and exit")
	fs.StringVar(&w.url, "endpoint-url", "", "with -new-endpoint: the URL events are sent to")
	fs.StringVar(&w.forms, "endpoint-forms", "", "with -new-endpoint: the forms it follows, comma-separated (default: every form of the account, those created later included)")
	fs.StringVar(&w.filter, "endpoint-filter", "", "with -new-endpoint: a filter, the submissions list's filter parameters and q as its query string (filter[rating][gte]=4&q=refund): the endpoint gets only the additions it keeps, and every deletion")
	fs.BoolVar(&w.loopback, "webhook-allow-loopback", false, "let endpoints be plain http and on loopback (127.0.0.1, localhost): for local tests only, never in production")
	fs.DurationVar(&w.poll, "webhook-poll", webhook.DefaultPollInterval, "with -webhooks: how often the dispatcher looks for new entries")
	fs.DurationVar(&w.timeout, "webhook-timeout", webhook.DefaultAttemptTimeout, "with -webhooks: the timeout of one delivery attempt")
	fs.Float64Var(&w.scale, "webhook-retry-scale", 1, "with -webhooks: multiply every wait between attempts by this, for load runs only (0.01: a 5 min wait takes 3 s)")
	return w
}

func (w *webhookFlags) options(logger *slog.Logger, obs observe.DeliveryObserver) []webhook.Option {
	opts := []webhook.Option{webhook.WithPollInterval(w.poll), webhook.WithLogger(logger), webhook.WithRetryScale(w.scale), webhook.WithEgress(w.egress(w.loopback))}
	if w.apiBase != "" {
		opts = append(opts, webhook.WithAPIBase(w.apiBase))
	}
	if obs != nil {
		opts = append(opts, webhook.WithObserver(obs))
	}
	if w.signer != nil {
		opts = append(opts, webhook.WithAttachmentURLs(w.signer))
	}
	return opts
}

// egress is the dispatcher's egress, with loopback receivers allowed or
// not.
func (w *webhookFlags) egress(loopback bool) webhook.Egress {
	e := webhook.Egress{Timeout: w.timeout}
	if loopback {
		e.AllowHTTP, e.AllowLoopback = true, true
	}
	return e
}

// checkURL checks -endpoint-url as the endpoint will be checked, and
// names -webhook-allow-loopback in the error when the URL is a receiver
// on this machine that the flag would let through.
func (w *webhookFlags) checkURL() error {
	_, err := w.egress(w.loopback).CheckURL(w.url)
	if err == nil {
		return nil
	}
	if u, lerr := w.egress(true).CheckURL(w.url); !w.loopback && lerr == nil && onLoopback(u.Hostname()) {
		return fmt.Errorf("-endpoint-url: %w; a receiver on this machine needs -webhook-allow-loopback (for local tests only)", err)
	}
	return fmt.Errorf("-endpoint-url: %w", err)
}

// onLoopback reports whether host names this machine: a loopback address
// or localhost.
func onLoopback(host string) bool {
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr.Unmap().IsLoopback()
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// isCommand reports whether -new-endpoint or -list-endpoints is given.
func (w *webhookFlags) isCommand() bool { return w.add != "" || w.list != "" }

// command runs -new-endpoint or -list-endpoints, if given; done reports
// that one ran and the server should exit.
func (w *webhookFlags) command(ctx context.Context, store backend, secret []byte, stdout io.Writer) (done bool, err error) {
	eps := webhook.NewEndpoints(store, store, secret, w.options(nil, nil)...)
	switch {
	case w.add != "":
		if w.url == "" {
			return true, fmt.Errorf("-new-endpoint needs -endpoint-url")
		}
		if err := w.checkURL(); err != nil {
			return true, err
		}
		var forms []string
		if w.forms != "" {
			forms = splitList(w.forms)
		}
		e, err := eps.AddFiltered(ctx, w.add, w.url, forms, w.filter)
		if err != nil {
			return true, fmt.Errorf("-new-endpoint: %w", err)
		}
		fmt.Fprintf(stdout, "new webhook endpoint %s for account %q\nsigning secret (shown once): %s\n", e.ID, e.AccountID, e.Secrets[0].Secret.Reveal())
		if e.Filter != "" {
			fmt.Fprintf(stdout, "filter: %s\n", e.Filter)
		}
		return true, nil
	case w.list != "":
		list, err := eps.List(ctx, w.list)
		if err != nil {
			return true, err
		}
		for _, e := range list {
			state := "enabled"
			if e.Disabled {
				state = "disabled: " + e.DisabledReason
			}
			forms := "every form"
			if len(e.Forms) > 0 {
				forms = strings.Join(e.Forms, ",")
			}
			filter := "no filter"
			if e.Filter != "" {
				filter = "filter " + e.Filter
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.URL, forms, filter, state)
			_, streams, err := eps.Get(ctx, w.list, e.ID)
			if err != nil {
				return true, err
			}
			for _, s := range streams {
				line := fmt.Sprintf("  form %s: delivered up to position %d", s.FormID, s.Cursor)
				if s.Attempts > 0 {
					line += fmt.Sprintf(", retrying (%d failed attempts, next at %s)", s.Attempts, s.NextAt.Format(time.RFC3339))
				}
				if s.Resync {
					line += ", stopped: needs a resync (a replay from the start)"
				}
				fmt.Fprintln(stdout, line)
			}
		}
		return true, nil
	}
	return false, nil
}

// start runs a dispatcher until ctx ends, if -webhooks asked for one;
// wait blocks until it stopped.
func (w *webhookFlags) start(ctx context.Context, store backend, secret []byte, logger *slog.Logger, obs observe.DeliveryObserver) (wait func()) {
	if !w.run {
		return func() {}
	}
	d := webhook.NewDispatcher(store, store, secret, w.options(logger, obs)...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx) // returns nil when ctx ends
	}()
	return func() { <-done }
}
