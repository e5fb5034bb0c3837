package stored

import "fmt"

// ItemError is the error of a batch's refused submission (see
// formsapi.BatchWriter): its index in the batch, its form when known,
// and why. errors.Is and errors.As see through it to Err.
type ItemError struct {
	Item int
	Form string // "" when the submission was refused before its form was looked at
	Err  error
}

// Error says which submission of the batch was refused, and why.
func (e *ItemError) Error() string {
	if e.Form == "" {
		return fmt.Sprintf("submission %d of the batch: %v", e.Item, e.Err)
	}
	return fmt.Sprintf("submission %d of the batch, to form %q: %v", e.Item, e.Form, e.Err)
}

// Unwrap returns Err.
func (e *ItemError) Unwrap() error { return e.Err }
