package web

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/infra/quota"
)

// QuotaProblem is the answer to a create refused by a project quota: the
// problem (409 for a count of things, 429 for runs not yet final), with
// the quota's name, its limit and the project's current use.
type QuotaProblem struct {
	huma.ErrorModel
	Quota string `json:"quota" required:"false" enum:"tasks,rooms,api_keys,queued_runs,backfill_ticks" doc:"the project quota the request would exceed; present only when a quota refused it"`
	Limit int    `json:"limit" required:"false" doc:"the quota: the most the project may have"`
	Used  int    `json:"used" required:"false" doc:"what the project has now"`
	Asked int    `json:"asked" required:"false" doc:"what the refused request would have added (a batch or backfill counts whole)"`
}

// quotaAnswers are the operations a project quota may refuse, with the
// status and quotas of each.
var quotaAnswers = map[string]struct {
	status int
	quotas string
}{
	"task-create":           {http.StatusConflict, "tasks"},
	"rooms-create":          {http.StatusConflict, "rooms"},
	"api-key-create":        {http.StatusConflict, "api_keys"},
	"task-run-create":       {http.StatusTooManyRequests, "queued_runs"},
	"task-run-batch-create": {http.StatusTooManyRequests, "queued_runs"},
	"run-retry":             {http.StatusTooManyRequests, "queued_runs"},
	"task-backfill":         {http.StatusTooManyRequests, "queued_runs, backfill_ticks"},
}

// documentQuotas is an OnAddOperation hook, after documentRateLimits: the
// operations a quota may refuse answer that status with a QuotaProblem.
func documentQuotas(oapi *huma.OpenAPI, op *huma.Operation) {
	a, ok := quotaAnswers[op.OperationID]
	if !ok || op.Responses == nil {
		return
	}
	code := strconv.Itoa(a.status)
	r := op.Responses[code]
	if r == nil {
		r = &huma.Response{}
		op.Responses[code] = r
	}
	r.Description = http.StatusText(a.status) + "; a project quota (" + a.quotas + ") when the problem names one"
	schema := oapi.Components.Schemas.Schema(reflect.TypeFor[QuotaProblem](), true, "QuotaProblem")
	r.Content = map[string]*huma.MediaType{"application/problem+json": {Schema: schema}}
}

// quotaRetryAfter is the Retry-After of a 429 quota answer: runs finish by
// themselves, so try again after a while.
const quotaRetryAfter = 5

// quotaError is the problem answering e; nothing was changed.
func quotaError(e *quota.ExceededError) error {
	p := &QuotaProblem{
		ErrorModel: huma.ErrorModel{
			Status: e.Status(), Title: http.StatusText(e.Status()),
			Detail: quotaDetail(e),
		},
		Quota: string(e.Quota), Limit: e.Limit, Used: e.Used, Asked: e.Asked,
	}
	if e.Status() == http.StatusTooManyRequests {
		return huma.ErrorWithHeaders(p, http.Header{"Retry-After": {strconv.Itoa(quotaRetryAfter)}})
	}
	return p
}

func quotaDetail(e *quota.ExceededError) string {
	what := map[quota.Name]string{
		quota.Tasks: "tasks", quota.Rooms: "rooms", quota.APIKeys: "API keys",
		quota.QueuedRuns: "runs not yet final", quota.BackfillTicks: "backfilled runs not yet final",
	}[e.Quota]
	fix := "delete one first"
	if e.Status() == http.StatusTooManyRequests {
		fix = "try again once some have finished"
	}
	return fmt.Sprintf("quota %s: the project has %d %s of at most %d, and this request would add %d; %s",
		e.Quota, e.Used, what, e.Limit, e.Asked, fix)
}
