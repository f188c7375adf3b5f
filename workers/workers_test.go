package workers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

// event is one publish a recordingPublisher saw.
type event struct {
	user, room, project, name string
	payload                   any
}

// recordingPublisher stands in for the realtime bus.
type recordingPublisher struct {
	mu     sync.Mutex
	events []event
}

func (p *recordingPublisher) PublishUser(_ context.Context, userID, name string, payload any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, event{user: userID, name: name, payload: payload})
	return nil
}

func (p *recordingPublisher) PublishProject(_ context.Context, project, name string, payload any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, event{project: project, name: name, payload: payload})
	return nil
}

// personal is the personal project of user.
func personal(t testing.TB, q db.DB, user string) string {
	t.Helper()
	id, err := accounts.PersonalProject(context.Background(), q, user)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (p *recordingPublisher) PublishRoom(_ context.Context, room, name string, payload any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, event{room: room, name: name, payload: payload})
	return nil
}

// runEvents lists the task.run.* events about one run, in order.
func (p *recordingPublisher) runEvents(runID string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, e := range p.events {
		if r, ok := e.payload.(jobs.Run); ok && r.ID == runID {
			out = append(out, e.name)
		}
	}
	return out
}

type testBundle struct {
	pool  *pgxpool.Pool
	river *river.Client[pgx.Tx]
	pub   *recordingPublisher
	owner string
}

type setupOpts struct {
	allowPrivate bool
	backoff      func(int) time.Duration
	rooms        RoomAccess
	metrics      *jobs.Metrics
}

// setup starts a working River client with the run worker on a fresh
// database, with fast retries and a recording publisher.
func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	pub := &recordingPublisher{}
	backoff := o.backoff
	if backoff == nil {
		backoff = func(int) time.Duration { return 100 * time.Millisecond }
	}
	client := startRiver(t, pool, Options{
		ClientID: uuid.NewString(), DB: pool, Publisher: pub, Rooms: o.rooms, RetryBackoff: backoff, Metrics: o.metrics,
		Webhook: WebhookOptions{AllowPrivate: o.allowPrivate},
	}, 100*time.Millisecond)
	return &testBundle{pool: pool, river: client, pub: pub, owner: dbtest.User(t, pool, nil).ID}
}

func startRiver(t *testing.T, pool *pgxpool.Pool, opts Options, poll time.Duration) *river.Client[pgx.Tx] {
	t.Helper()
	opts.Logger = dbtest.Logger(t)
	cfg, err := RiverConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg.FetchPollInterval = poll
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	return client
}

// task stores a task (private targets allowed at save time: the worker's
// guard is what is under test) that is not due for an hour.
func (b *testBundle) task(t *testing.T, action jobs.Action, mods ...func(*jobs.Task)) jobs.Task {
	t.Helper()
	task := jobs.Task{OwnerID: b.owner, Name: "test", Schedule: new("@every 1h"), Active: true, Action: action}
	for _, m := range mods {
		m(&task)
	}
	if err := task.Normalize(true); err != nil {
		t.Fatal(err)
	}
	out, err := jobs.CreateTask(context.Background(), b.pool, quota.Limits{}, task)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (b *testBundle) trigger(t *testing.T, taskID string) jobs.Run {
	t.Helper()
	run, err := jobs.TriggerRun(context.Background(), b.pool, b.river, personal(t, b.pool, b.owner), taskID)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// waitRun waits until the run reaches a final status and returns it.
func (b *testBundle) waitRun(t *testing.T, id string, within time.Duration) jobs.Run {
	t.Helper()
	var run jobs.Run
	testwait.For(t, within, "run "+id+" to finish", func() bool {
		var err error
		run, err = jobs.GetRun(context.Background(), b.pool, personal(t, b.pool, b.owner), id)
		if err != nil {
			t.Fatal(err)
		}
		return run.FinishedAt != nil
	})
	return run
}

// hit is one request a hookServer received.
type hit struct {
	at     time.Time
	header http.Header
	body   []byte
}

// hookServer records every request and answers with respond(n) for the
// n-th request (0-based).
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

func newHookServer(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *hookServer {
	t.Helper()
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		n := len(h.hits)
		h.hits = append(h.hits, hit{at: time.Now(), header: r.Header.Clone(), body: body})
		h.mu.Unlock()
		respond(n, w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) requests() []hit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hit(nil), h.hits...)
}

func webhook(url string) jobs.Action {
	return jobs.Action{Type: jobs.ActionWebhook, URL: url}
}
