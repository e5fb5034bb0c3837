package main

import (
	"fmt"
	"time"

	"github.com/formsapi/formsapi"
)

var demoStart = time.Date(2024, 9, 2, 8, 0, 0, 0, time.UTC)

func demoForms() []formsapi.Form {
	return []formsapi.Form{
		{ID: "contact", Title: "Contact us", Icon: "mail", NotificationEmail: "hello@example.com", CreatedAt: demoStart},
		{ID: "newsletter", Title: "Newsletter sign-up", Icon: "newspaper", NotificationEmail: "marketing@example.com", CreatedAt: demoStart.Add(24 * time.Hour)},
		{ID: "job-application", Title: "Job application", Icon: "briefcase", NotificationEmail: "jobs@example.com", CreatedAt: demoStart.Add(48 * time.Hour)},
	}
}

type demoSubmission struct {
	sub  formsapi.Submission
	meta formsapi.Metadata
}

// demoSubmissions are realistic entries; their metadata (IP, user agent,
// geo, trace) is what the API must never show. Each has an ID
// (Metadata.ID, never shown either), the form's ID and its number in the
// form, contact-1 to contact-6, newsletter-1 to newsletter-6 and
// job-application-1 to job-application-3, by which -delete names it.
func demoSubmissions() []demoSubmission {
	n := map[string]int{}
	withID := func(formID string, meta formsapi.Metadata) formsapi.Metadata {
		n[formID]++
		meta.ID = fmt.Sprintf("%s-%d", formID, n[formID])
		return meta
	}
	people := []struct{ name, email, city string }{
		{"Ada Lovelace", "ada@example.com", "London"},
		{"Grace Hopper", "grace@example.org", "Arlington"},
		{"Alan Turing", "alan@example.net", "Manchester"},
		{"Katherine Johnson", "katherine@example.com", "Hampton"},
		{"Edsger Dijkstra", "edsger@example.nl", "Eindhoven"},
		{"Barbara Liskov", "barbara@example.edu", "Boston"},
	}
	// Referees of the job applications: something for q=zoe to find
	// (docs/api.md, "Search: q").
	referees := []string{"Zoë Ünal", "Charles Babbage", "Jean Bartik"}
	var out []demoSubmission
	for i, p := range people {
		meta := formsapi.Metadata{
			ClientIP:  fmt.Sprintf("198.51.100.%d", 10+i),
			UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0",
			Geo:       []byte(fmt.Sprintf(`{"city":%q,"country":"XX"}`, p.city)),
			TraceID:   fmt.Sprintf("trace-%04d", i),
		}
		at := demoStart.Add(time.Duration(72+i*5) * time.Hour)
		out = append(out,
			demoSubmission{formsapi.Submission{FormID: "contact", CreatedAt: at,
				Data: []byte(fmt.Sprintf(`{"name":%q,"email":%q,"subject":"Question %d","message":"Hello! Could you tell me more about your pricing?"}`, p.name, p.email, i+1))}, withID("contact", meta)},
			demoSubmission{formsapi.Submission{FormID: "newsletter", CreatedAt: at.Add(time.Hour),
				Data: []byte(fmt.Sprintf(`{"email":%q,"topics":["releases","events"],"consent":true}`, p.email))}, withID("newsletter", meta)},
		)
		if i%2 == 0 {
			out = append(out, demoSubmission{formsapi.Submission{FormID: "job-application", CreatedAt: at.Add(2 * time.Hour),
				Data: []byte(fmt.Sprintf(`{"name":%q,"email":%q,"position":"Backend engineer","yearsOfExperience":%d,"referee":%q}`, p.name, p.email, 3+i, referees[i/2])),
				Attachments: []formsapi.Attachment{
					{FieldName: "cv", FileURL: fmt.Sprintf("https://files.example.com/uploads/%04d/cv.pdf", i), FileSize: int64(84211 + i*1000), MIMEType: "application/pdf"},
					{FieldName: "portfolio", FileURL: fmt.Sprintf("https://files.example.com/uploads/%04d/portfolio.zip", i), FileSize: int64(2048000 + i), MIMEType: "application/zip"},
				}}, withID("job-application", meta)})
		}
	}
	return out
}
