package benchdata

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/formsapi/formsapi"
)

// Tenant is one generated account of the multi-tenant workload: its API
// key and the IDs of its forms.
type Tenant struct {
	Account string
	Key     string
	Forms   []string
}

// TenantAccount and TenantForm name the generated accounts and forms.
func TenantAccount(a int) string { return fmt.Sprintf("tenant-%02d", a) }
func TenantForm(a, f int) string { return fmt.Sprintf("t%02d-form-%02d", a, f) }

// LoadTenants adds accounts accounts to w, each with a new key from
// formsapi.NewKey and forms forms of perForm submissions each (the same
// realistic submissions as Load, in batches), and returns them. progress, if not nil,
// is called after each form with the submissions added so far.
func LoadTenants(ctx context.Context, w formsapi.Writer, accounts, forms, perForm int, progress func(done int)) ([]Tenant, error) {
	var ts []Tenant
	done := 0
	for a := range accounts {
		key, err := formsapi.NewKey()
		if err != nil {
			return nil, fmt.Errorf("benchdata: %w", err)
		}
		t := Tenant{Account: TenantAccount(a), Key: key}
		if err := w.AddKey(ctx, key, t.Account); err != nil {
			return nil, fmt.Errorf("benchdata: %w", err)
		}
		for f := range forms {
			id := TenantForm(a, f)
			if err := w.AddForm(ctx, t.Account, formsapi.Form{ID: id, Title: "Form " + id, CreatedAt: At(f)}); err != nil {
				return nil, fmt.Errorf("benchdata: %w", err)
			}
			t.Forms = append(t.Forms, id)
			if err := AddAll(ctx, w, perForm, 0, func(i int) (formsapi.Submission, formsapi.Metadata) { return Submission(id, i) }, nil); err != nil {
				return nil, err
			}
			done += perForm
			if progress != nil {
				progress(done)
			}
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// MixedLimits are the page sizes of the multi-tenant requests.
var MixedLimits = []int{10, 25, 50, 100}

// MixedRequest returns a request target of the multi-tenant workload, as
// bench/mixed.lua makes them, and the key to send: a random tenant; 1 in
// 20 lists its forms, the others one of its forms' submissions with a
// random limit from MixedLimits and a random order.
func MixedRequest(r *rand.Rand, ts []Tenant) (target, key string) {
	t := ts[r.IntN(len(ts))]
	if r.IntN(20) == 0 {
		return "/v1/forms", t.Key
	}
	order := "asc"
	if r.IntN(2) == 0 {
		order = "desc"
	}
	return "/v1/forms/" + t.Forms[r.IntN(len(t.Forms))] + "/submissions?limit=" +
		strconv.Itoa(MixedLimits[r.IntN(len(MixedLimits))]) + "&order=" + order, t.Key
}
