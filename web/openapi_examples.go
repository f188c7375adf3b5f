package web

// operationExamples are the documented examples of every operation, by
// operation id: the request body's (status 0), a response body's, or a
// query parameter's. TestOpenAPIDocument checks that every operation has
// one and that each is valid against its schema.
var operationExamples = map[string][]example{
	"health-live":  {{status: 200, value: `{"status":"ok"}`}},
	"health-ready": {{status: 200, value: `{"status":"ok"}`}, {status: 503, value: `{"status":"unavailable","reason":"postgres: context deadline exceeded"}`}},

	"auth-register": {
		{value: `{"email":"ada@example.com","password":"correct horse battery"}`},
		{status: 201, value: exAuth},
	},
	"auth-login": {
		{value: `{"email":"ada@example.com","password":"correct horse battery"}`},
		{status: 200, value: exAuth},
		{status: 401, value: `{"title":"Unauthorized","status":401,"detail":"wrong email or password"}`},
	},
	"me":                 {{status: 200, value: exUser}},
	"auth-logout":        {{status: 401, value: `{"title":"Unauthorized","status":401,"detail":"this token was signed out; log in again"}`}},
	"me-sessions-revoke": {{status: 403, value: `{"title":"Forbidden","status":403,"detail":"` + needsUserToken + `"}`}},
	"me-password-change": {
		{value: `{"current_password":"correct horse battery","new_password":"staple of the horse"}`},
		{status: 200, value: exAuth},
		{status: 403, value: `{"title":"Forbidden","status":403,"detail":"the current password is wrong"}`},
	},
	"auth-registration": {{status: 200, value: `{"registration":"invite"}`}},
	"auth-forgot": {
		{value: `{"email":"ada@example.com"}`},
		{status: 202, value: `{"message":"` + forgotAnswer + `"}`},
	},
	"auth-reset": {
		{value: `{"token":"sbr_Qm3xT7aLw9Zr8sPbK2fY5vN1cH6dJ0gE4uR-oI_8wXs","password":"staple of the horse"}`},
		{status: 400, value: `{"title":"Bad Request","status":400,"detail":"this reset link is unknown, was used already or has expired: ask for a new one"}`},
	},

	"api-key-create": {
		{value: `{"name":"billing backend","scopes":["read"],"expires_at":"2027-06-01T00:00:00Z"}`},
		{status: 201, value: `{"id":"4a1c2f0e-8b7d-4c3e-9f21-6d5e4b3a2c10","name":"billing backend","prefix":"sbk_3fQ9xK2m","scopes":["read"],` +
			`"created_at":"2026-12-01T09:00:00Z","expires_at":"2027-06-01T00:00:00Z","last_used_at":null,` +
			`"secret":"sbk_3fQ9xK2m_Wq8vYtZr5LpHs1NcXbD7eGjK0aUiOoM4"}`},
	},
	"api-key-list": {{status: 200, value: `{"items":[{"id":"4a1c2f0e-8b7d-4c3e-9f21-6d5e4b3a2c10","name":"billing backend","prefix":"sbk_3fQ9xK2m",` +
		`"scopes":["read"],"created_at":"2026-12-01T09:00:00Z","expires_at":"2027-06-01T00:00:00Z","last_used_at":"2026-12-01T09:05:12Z"}]}`}},
	"api-key-revoke": {{status: 404, value: `{"title":"Not Found","status":404,"detail":"no such API key"}`}},

	"project-create":        {{value: `{"name":"Billing"}`}, {status: 201, value: exProject}},
	"project-list":          {{status: 200, value: `{"items":[` + exProject + `]}`}},
	"project-get":           {{status: 200, value: exProject}},
	"project-rename":        {{value: `{"name":"Billing team"}`}, {status: 200, value: exProject}},
	"project-delete":        {{status: 409, value: `{"title":"Conflict","status":409,"detail":"a personal project cannot be deleted; rename it instead"}`}},
	"project-member-list":   {{status: 200, value: `{"items":[` + exProjectMember + `],"next_cursor":null}`}},
	"project-member-update": {{value: `{"role":"developer"}`}, {status: 200, value: exProjectMember}},
	"project-member-remove": {{status: 409, value: `{"title":"Conflict","status":409,"detail":"a project keeps at least one owner: make another member owner first"}`}},
	"project-leave":         {{status: 404, value: `{"title":"Not Found","status":404,"detail":"project not found"}`}},
	"project-invite-create": {{value: `{"email":"grace@example.com","role":"developer"}`}, {status: 201, value: `{"id":"7c2e4a6b-8d0f-4b1c-9e3a-5f7b9d1c3e5a","email":"grace@example.com","role":"developer",` +
		`"created_at":"2026-12-01T09:00:00Z","expires_at":"2026-12-08T09:00:00Z","token":"sbi_Wq8vYtZr5LpHs1NcXbD7eGjK0aUiOoM4x2Jk9Qp3Rs6"}`}},
	"project-invite-list": {{status: 200, value: `{"items":[{"id":"7c2e4a6b-8d0f-4b1c-9e3a-5f7b9d1c3e5a","email":"grace@example.com","role":"developer",` +
		`"created_at":"2026-12-01T09:00:00Z","expires_at":"2026-12-08T09:00:00Z"}]}`}},
	"project-invite-revoke": {{status: 404, value: `{"title":"Not Found","status":404,"detail":"this invite is unknown, used, revoked or expired"}`}},
	"invite-accept":         {{value: `{"token":"sbi_Wq8vYtZr5LpHs1NcXbD7eGjK0aUiOoM4x2Jk9Qp3Rs6"}`}, {status: 200, value: `{"project":` + exProject + `,"role":"developer"}`}},

	"task-create": {
		{value: `{"name":"nightly report","schedule":"0 3 * * *","timezone":"Europe/Paris",` +
			`"action":{"type":"webhook","url":"https://example.com/hooks/report","method":"POST","body":{"report":"daily"}}}`},
		{status: 201, value: exTaskWithSecret},
	},
	"task-list": {{status: 200, value: `{"items":[` + exTask + `],"next_cursor":null}`}},
	"task-get":  {{status: 200, value: exTask}},
	"task-update": {
		{value: `{"schedule":"30 4 * * 1-5","action":{"type":"publish","event":"report.ready","room":"reports","payload":{"report":"daily"}}}`},
		{status: 200, value: exTask},
	},
	"task-delete": {{status: 404, value: `{"title":"Not Found","status":404,"detail":"no such task"}`}},
	"task-rotate-secret": {
		{value: `{"previous_expires_at":"2026-12-02T09:00:00Z"}`},
		{status: 200, value: exTaskRotated},
	},

	"task-run-create": {
		{value: `{"payload":{"invoice":"INV-2041"},"idempotency_key":"invoice-INV-2041"}`},
		{status: 202, value: exRun},
	},
	"task-run-batch-create": {
		{value: `{"items":[{"payload":{"invoice":"INV-2041"},"idempotency_key":"invoice-INV-2041"},` +
			`{"payload":{"invoice":"INV-2042"},"idempotency_key":"invoice-INV-2042","run_at":"2026-12-01T09:00:00Z"},` +
			`{"payload":{"invoice":"INV-2041"},"idempotency_key":"invoice-INV-2041"}]}`},
		{status: 200, value: `{"created":1,"replayed":1,"failed":1,"items":[{"status":202,"replayed":false,"run":` + exRun + `},` +
			`{"status":422,"replayed":false,"problem":{"status":422,"title":"Unprocessable Entity",` +
			`"detail":"run_at is in the past; omit it to run now","errors":[{"location":"body.items[1].run_at","message":"run_at is in the past; omit it to run now"}]}},` +
			`{"status":200,"replayed":true,"run":` + exRun + `}]}`},
	},
	"task-run-list": {{status: 200, value: `{"items":[` + exRun + `],"next_cursor":null}`}},
	"run-list":      {{param: "status", value: `"failed"`}, {status: 200, value: `{"items":[` + exRun + `],"next_cursor":null}`}},
	"run-get":       {{status: 200, value: exRun}},
	"run-cancel":    {{status: 200, value: exRunCancelled}},
	"run-retry":     {{status: 202, value: exRun}},
	"run-attempt-list": {{status: 200, value: `{"items":[{"attempt":1,"status":"failed","started_at":"2026-12-01T03:00:00.120Z",` +
		`"finished_at":"2026-12-01T03:00:00.480Z","duration_ms":360,"http_status":502,"error":"webhook answered 502",` +
		`"response_excerpt":"Bad Gateway"}]}`}},
	"task-backfill": {
		{value: `{"from":"2026-11-28T00:00:00Z","to":"2026-11-30T00:00:00Z"}`},
		{status: 202, value: `{"ticks":2,"created":1,"items":[` + exRun + `]}`},
	},

	"ws-ticket":  {{status: 201, value: `{"ticket":"tkt_9d2fQmX7aLw3Zr8sPb","expires_at":"2026-12-01T09:00:30Z"}`}},
	"ws-connect": {{param: "ticket", value: `"tkt_9d2fQmX7aLw3Zr8sPb"`}},
	"events-publish": {
		{value: `{"room":"reports","event":"report.ready","payload":{"report":"daily"}}`},
		{status: 202, value: `{"id":"0f6c1e7a-3b4d-4e8f-a1b2-c3d4e5f60718"}`},
	},
	"users-rpc": {
		{value: `{"method":"location.get","params":{"precise":false},"timeout_ms":5000}`},
		{status: 200, value: `{"result":{"city":"Paris"}}`},
	},
	"history-read": {
		{param: "stream", value: `"room:reports"`},
		{status: 200, value: `{"stream":"room:reports","epoch":"e1","events":[{"event":"report.ready","room":"reports","offset":42,"epoch":"e1"}],"oldest_offset":1,"last_offset":42,"next_offset":42,"more":false,"recovered":true}`},
	},
	"presence": {{status: 200, value: `{"room":"reports","users":[{"user_id":"6b0e2a4c-1d3f-4a5b-8c7d-9e0f1a2b3c4d","connections":2}],` +
		`"degraded":false,"unavailable_nodes":[]}`}},

	"rooms-create": {
		{value: `{"name":"board","visibility":"members"}`},
		{status: 201, value: exRoom},
	},
	"rooms-get": {{status: 200, value: exRoom}},
	"rooms-update": {
		{value: `{"visibility":"open"}`},
		{status: 200, value: exRoom},
	},
	"rooms-delete":         {{status: 404, value: `{"title":"Not Found","status":404,"detail":"no room \"board\" was created (a name nobody created is an open ad-hoc room)"}`}},
	"rooms-members-list":   {{status: 200, value: `{"items":[` + exMember + `],"next_cursor":null}`}},
	"rooms-members-put":    {{status: 200, value: exMember}},
	"rooms-members-delete": {{status: 409, value: `{"title":"Conflict","status":409,"detail":"the owner is always a member of the room; delete the room instead"}`}},

	"admin-list-users": {{status: 200, value: `{"items":[` + exUser + `],"next_cursor":""}`}},
	"admin-get-user":   {{status: 200, value: exUser}},
	"admin-update-user": {
		{value: `{"disabled":true}`},
		{status: 200, value: `{"id":"6b0e2a4c-1d3f-4a5b-8c7d-9e0f1a2b3c4d","email":"ada@example.com","role":"user","disabled":true,"created_at":"2026-11-02T10:00:00Z"}`},
	},
	"cluster-status": {{status: 200, value: `{"nodes":[{"id":"c3a1b2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d","name":"web-1","addr":"10.0.0.5:8080",` +
		`"roles":["web","worker"],"version":"v1.4.0","started_at":"2026-12-01T08:00:00Z","heartbeat_age_ms":850,"draining":false,` +
		`"reachable":true,"ws_connections":42,"jobs_running":3}],"queue":{"available":0,"running":3,"scheduled":12,"retryable":1,"discarded":0},` +
		`"scheduler":{"due_tasks":0,"oldest_due_age_ms":0},"backlog":{"demand":6,"available_jobs":0,"scheduled_jobs":13,"scheduled_due_jobs":1,` +
		`"running_jobs":3,"oldest_available_age_ms":420,"due_tasks":2,"oldest_due_age_ms":150,"notification_queue_usage":0},"degraded":false}`}},
	"admin-password-reset": {{status: 200, value: `{"url":"https://switchboard.example.com/console/#/reset?token=sbr_Qm3xT7aLw9Zr8sPbK2fY5vN1cH6dJ0gE4uR-oI_8wXs",` +
		`"token":"sbr_Qm3xT7aLw9Zr8sPbK2fY5vN1cH6dJ0gE4uR-oI_8wXs","expires_at":"2026-12-01T10:00:00Z"}`}},
	"admin-disconnect-user": {{status: 200, value: `{"acked":["c3a1b2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"],"failed":[],"closed":2}`}},
	"admin-drain-node":      {{status: 200, value: `{"acked":true}`}},
}

const (
	exUser = `{"id":"6b0e2a4c-1d3f-4a5b-8c7d-9e0f1a2b3c4d","email":"ada@example.com","role":"user","disabled":false,"created_at":"2026-11-02T10:00:00Z"}`
	exAuth = `{"token":"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI2YjBlMmE0YyJ9.sig","expires_at":"2026-12-02T09:00:00Z","user":` + exUser + `}`

	exRoom = `{"name":"board","owner_id":"6b0e2a4c-1d3f-4a5b-8c7d-9e0f1a2b3c4d","project_id":"0f3c9a1e-2b4d-4e6f-8a1b-3c5d7e9f1a2b","visibility":"members",` +
		`"created_at":"2026-12-01T09:00:00Z","updated_at":"2026-12-01T09:00:00Z"}`
	exProject = `{"id":"0f3c9a1e-2b4d-4e6f-8a1b-3c5d7e9f1a2b","name":"Billing","personal":false,"role":"owner",` +
		`"created_at":"2026-12-01T09:00:00Z","updated_at":"2026-12-01T09:00:00Z"}`
	exProjectMember = `{"user_id":"6b0e2a4c-1d3f-4a5b-8c7d-9e0f1a2b3c4d","email":"ada@example.com","role":"owner","added_at":"2026-12-01T09:00:00Z"}`
	exMember        = `{"user_id":"6b0e2a4c-1d3f-4a5b-8c7d-9e0f1a2b3c4d","added_at":"2026-12-01T09:00:00Z"}`

	exTaskFields = `"id":"9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b","project_id":"0f3c9a1e-2b4d-4e6f-8a1b-3c5d7e9f1a2b","name":"nightly report","schedule":"0 3 * * *","timezone":"Europe/Paris",` +
		`"action":{"type":"webhook","url":"https://example.com/hooks/report","method":"POST","body":{"report":"daily"}},` +
		`"active":true,"overlap":"skip","max_concurrency":null,"max_attempts":3,"timeout_seconds":30,"priority":1,` +
		`"next_run_at":"2026-12-02T02:00:00Z","last_run_at":"2026-12-01T02:00:00Z","run_count":14,"skipped_ticks":0,` +
		`"created_at":"2026-11-17T08:30:00Z"`
	exTask           = `{` + exTaskFields + `,"updated_at":"2026-11-17T08:30:00Z","previous_secret_expires_at":null}`
	exTaskWithSecret = `{` + exTaskFields + `,"updated_at":"2026-11-17T08:30:00Z","previous_secret_expires_at":null,` +
		`"signing_secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`
	exTaskRotated = `{` + exTaskFields + `,"updated_at":"2026-12-01T09:00:00Z","previous_secret_expires_at":"2026-12-02T09:00:00Z",` +
		`"signing_secret":"whsec_2b7XoQ1nVfRk9cLsE4tYhUgJmA8dPzWi"}`

	exRunFields = `"id":"1f2e3d4c-5b6a-4978-8a6b-5c4d3e2f1a0b","task_id":"9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b","trigger":"manual",` +
		`"scheduled_for":"2026-12-01T09:00:00Z","attempt":0,"payload":{"invoice":"INV-2041"},"started_at":null,"finished_at":null,` +
		`"duration_ms":null,"http_status":null,"error":null,"response_excerpt":null,"next_attempt_at":null,"retry_of":null,` +
		`"skipped_ticks":0,"priority":1,"output":null,"output_truncated":false,"created_at":"2026-12-01T09:00:00Z"`
	exRun          = `{` + exRunFields + `,"status":"queued"}`
	exRunCancelled = `{` + exRunFields + `,"status":"cancelled"}`
)
