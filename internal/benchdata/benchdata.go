// Package benchdata makes the realistic data every benchmark and load run
// uses: submissions with name, email, company and message fields, one
// attachment, and internal metadata, about 340 bytes each on the wire, so
// a 100-item page is about 34 KB.
package benchdata

import (
	"context"
	"fmt"
	"time"

	"github.com/formsapi/formsapi"
)

// Account owns every generated form.
const Account = "bench"

// Start is the time of the first generated submission; each later one is a
// second after the one before, with every tenth sharing its predecessor's
// time so that pages break inside runs of equal timestamps.
var Start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// FormID names generated form f.
func FormID(f int) string { return fmt.Sprintf("bench-form-%03d", f) }

// At is the creation time of submission i.
func At(i int) time.Time { return Start.Add(time.Duration(i-i/10) * time.Second) }

// Submission returns submission i of form formID and its metadata.
func Submission(formID string, i int) (formsapi.Submission, formsapi.Metadata) {
	data := fmt.Sprintf(`{"name":"Person %d","email":"person%d@example.com","company":"Example Holdings %d Ltd","message":"Hello, I would like to know more about your plans for teams of %d people. Could someone call me back this week?"}`,
		i, i, i%97, i%50+2)
	s := formsapi.Submission{
		FormID: formID,
		Data:   []byte(data),
		Attachments: []formsapi.Attachment{{
			FieldName: "attachment",
			FileURL:   fmt.Sprintf("https://files.example.com/uploads/%s/%d/brief.pdf", formID, i),
			FileSize:  int64(20000 + i%5000),
			MIMEType:  "application/pdf",
		}},
		CreatedAt: At(i),
	}
	m := formsapi.Metadata{
		ClientIP:  fmt.Sprintf("198.51.%d.%d", i/250%250, i%250),
		UserAgent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15",
		Geo:       []byte(`{"country":"NL","city":"Utrecht","lat":52.09,"lon":5.12}`),
		TraceID:   fmt.Sprintf("00-%032x-%016x-01", i, i),
	}
	return s, m
}

// Load adds one form per entry of counts to w, form f with counts[f]
// submissions (in batches, see AddAll), and key for Account when key is
// not empty. progress, if not nil, is called about every 10,000
// submissions.
func Load(ctx context.Context, w formsapi.Writer, counts []int, key string, progress func(done int)) error {
	done, reported := 0, 0
	for f, perForm := range counts {
		id := FormID(f)
		if err := w.AddForm(ctx, Account, formsapi.Form{ID: id, Title: fmt.Sprintf("Benchmark form %d", f),
			Icon: "mail", NotificationEmail: "bench@example.com", CreatedAt: Start.Add(-time.Duration(f) * time.Hour)}); err != nil {
			return fmt.Errorf("benchdata: %w", err)
		}
		err := AddAll(ctx, w, perForm, 0, func(i int) (formsapi.Submission, formsapi.Metadata) { return Submission(id, i) }, func(n int) {
			if progress != nil && (done+n)/10000 > reported/10000 {
				reported = done + n
				progress(reported)
			}
		})
		if err != nil {
			return err
		}
		done += perForm
	}
	if key != "" {
		if err := w.AddKey(ctx, key, Account); err != nil {
			return fmt.Errorf("benchdata: %w", err)
		}
	}
	return nil
}

// WideSubmission returns submission i of form formID with the ten data
// fields of a sign-up form (name, email, phone, company, role, teamSize
// as a number, country, newsletter as a boolean, source, message), about
// 330 bytes of data and 500 on the wire with its attachment, and its
// metadata: the data of the export benchmark (bench/export.sh). The
// phone starts with "+", a cell the CSV export escapes.
func WideSubmission(formID string, i int) (formsapi.Submission, formsapi.Metadata) {
	s, m := Submission(formID, i)
	countries := [...]string{"NL", "DE", "FR", "GB", "US", "ES", "IT", "SE"}
	sources := [...]string{"search", "newsletter", "referral", "event", "social"}
	s.Data = []byte(fmt.Sprintf(`{"name":"Person %d","email":"person%d@example.com","phone":"+31 6 %08d","company":"Example Holdings %d Ltd","role":"Operations lead","teamSize":%d,"country":"%s","newsletter":%t,"source":"%s","message":"Could someone call me back this week about plans for teams?"}`,
		i, i, i%100000000, i%97, i%50+2, countries[i%len(countries)], i%3 == 0, sources[i%len(sources)]))
	return s, m
}

// BatchSize is how many submissions the generators write in one
// transaction through formsapi.BatchWriter: a few thousand, as
// docs/stores.md advises, so a long load never holds other writers up for
// long.
const BatchSize = 2000

// AddAll writes item(i) for every i from 0 to n-1, in that order, through
// w: in batches of size (BatchSize when size is 0) when w is a
// formsapi.BatchWriter, one AddSubmission at a time otherwise. progress,
// if not nil, is called with the number written after each batch (after
// each BatchSize single writes).
func AddAll(ctx context.Context, w formsapi.Writer, n, size int, item func(i int) (formsapi.Submission, formsapi.Metadata), progress func(done int)) error {
	if size <= 0 {
		size = BatchSize
	}
	bw, ok := w.(formsapi.BatchWriter)
	for start := 0; start < n; start += size {
		end := min(start+size, n)
		if ok {
			err := bw.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
				for i := start; i < end; i++ {
					if !yield(item(i)) {
						return
					}
				}
			})
			if err != nil {
				return fmt.Errorf("benchdata: submissions %d to %d: %w", start, end-1, err)
			}
		} else {
			for i := start; i < end; i++ {
				s, m := item(i)
				if err := w.AddSubmission(ctx, s, m); err != nil {
					return fmt.Errorf("benchdata: submission %d: %w", i, err)
				}
			}
		}
		if progress != nil {
			progress(end)
		}
	}
	return nil
}
