package redislimit

// Waiting is how many decisions wait for the next round trip.
func Waiting(l *Limiter) int { return l.calls.Waiting() }
