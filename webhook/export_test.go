package webhook

// WithRand sets where the retry schedule's jitter comes from (rand.Float64
// unless set), so that a test knows each wait exactly.
func WithRand(rnd func() float64) Option {
	return func(c *config) { c.rnd = rnd }
}

// RefOf returns the feed's ref of the submission at position pos of
// form, as the handler with cursorSecret gives it: tests map refs back
// to positions with it.
func RefOf(cursorSecret []byte, account, form string, pos int64) string {
	return newTokens(cursorSecret).ref(account, form, pos)
}
