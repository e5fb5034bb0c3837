package webhook

import (
	"time"

	"github.com/formsapi/formsapi"
)

func submissionOf(form, data string, at time.Time) formsapi.Submission {
	return formsapi.Submission{FormID: form, Data: []byte(data), CreatedAt: at}
}
