package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestTaskNormalize(t *testing.T) {
	t.Parallel()
	hook := func(url string) Action { return Action{Type: ActionWebhook, URL: url} }
	for _, tc := range []struct {
		name      string
		task      Task
		wantField string // "" means valid
	}{
		{"minimal webhook", Task{Name: "a", Schedule: new("@hourly"), Action: hook("https://example.com/hook")}, ""},
		{"publish to a room", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: "report", Room: "ops"}}, ""},
		{"empty name", Task{Name: " ", Schedule: new("@hourly"), Action: hook("https://example.com")}, "name"},
		{"bad cron", Task{Name: "a", Schedule: new("every day"), Action: hook("https://example.com")}, "schedule"},
		{"bad zone", Task{Name: "a", Schedule: new("@hourly"), Timezone: "Europe/Atlantis", Action: hook("https://example.com")}, "timezone"},
		{"bad overlap", Task{Name: "a", Schedule: new("@hourly"), Overlap: "queue", Action: hook("https://example.com")}, "overlap"},
		{"too many attempts", Task{Name: "a", Schedule: new("@hourly"), MaxAttempts: 26, Action: hook("https://example.com")}, "max_attempts"},
		{"negative timeout", Task{Name: "a", Schedule: new("@hourly"), TimeoutSeconds: -1, Action: hook("https://example.com")}, "timeout_seconds"},
		{"no action type", Task{Name: "a", Schedule: new("@hourly")}, "action.type"},
		{"unknown action type", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: "email"}}, "action.type"},
		{"ftp url", Task{Name: "a", Schedule: new("@hourly"), Action: hook("ftp://example.com")}, "action.url"},
		{"relative url", Task{Name: "a", Schedule: new("@hourly"), Action: hook("/hook")}, "action.url"},
		{"loopback url", Task{Name: "a", Schedule: new("@hourly"), Action: hook("http://127.0.0.1:8080/x")}, "action.url"},
		{"metadata url", Task{Name: "a", Schedule: new("@hourly"), Action: hook("http://169.254.169.254/latest")}, "action.url"},
		{"localhost url", Task{Name: "a", Schedule: new("@hourly"), Action: hook("http://localhost/x")}, "action.url"},
		{"bad method", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Method: "TRACE"}}, "action.method"},
		{"signature header", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"Webhook-Signature": "x"}}}, "action.headers"},
		{"host header", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"host": "x"}}}, "action.headers"},
		{"header injection", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"X-A": "1\r\nX-B: 2"}}}, "action.headers"},
		{"webhook with event", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Event: "x"}}, "action"},
		{"publish without event", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish}}, "action.event"},
		{"reserved event", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: "task.run.succeeded"}}, "action.event"},
		{"header name with é", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"Xé": "1"}}}, "action.headers"},
		{"header value with a control byte", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"X-A": "a\x01"}}}, "action.headers"},
		{"header value with DEL", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"X-A": "a\x7f"}}}, "action.headers"},
		{"webhook-signature header", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"Webhook-Signature": "v1,x"}}}, "action.headers"},
		{"host header", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"host": "evil"}}}, "action.headers"},
		{"hop-by-hop header", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"Keep-Alive": "1"}}}, "action.headers"},
		{"user-agent header", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"User-Agent": "x"}}}, "action.headers"},
		{"one header twice", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"X-A": "1", "x-a": "2"}}}, "action.headers"},
		{"good headers", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Headers: map[string]string{"Authorization": "Bearer x", "X-Tab": "a\tb", "X-Latin": "caf\xe9"}}}, ""},
		{"blank room", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: "report", Room: " "}}, "action.room"},
		{"room of 150 bytes", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: "report", Room: strings.Repeat("r", 150)}}, "action.room"},
		{"room with a control byte", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: "report", Room: "a\x01b"}}, "action.room"},
		{"event with a space", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: "daily report"}}, "action.event"},
		{"event of 80 bytes", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: strings.Repeat("e", 80)}}, "action.event"},
		{"publish with url", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionPublish, Event: "x", URL: "https://example.com"}}, "action"},
		{"huge body", Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com", Body: json.RawMessage(`"` + strings.Repeat("x", 70<<10) + `"`)}}, "action.body"},
	} {
		err := tc.task.Normalize(false)
		v, isValidation := IsValidation(err)
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantField != "" && (!isValidation || v.Field != tc.wantField):
			t.Errorf("%s: error %v, want a validation error on %s", tc.name, err, tc.wantField)
		}
	}

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		task := Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "https://example.com"}}
		if err := task.Normalize(false); err != nil {
			t.Fatal(err)
		}
		if task.Timezone != "UTC" || task.Overlap != OverlapSkip || task.MaxAttempts != 3 || task.TimeoutSeconds != 30 || task.Action.Method != "POST" {
			t.Fatalf("defaults not applied: %+v", task)
		}
	})
	t.Run("private targets allowed by configuration", func(t *testing.T) {
		t.Parallel()
		task := Task{Name: "a", Schedule: new("@hourly"), Action: Action{Type: ActionWebhook, URL: "http://127.0.0.1:9/x"}}
		if err := task.Normalize(true); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCheckTargetIP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ip           string
		blocked      bool // with allowPrivate false
		blockedAllow bool // with allowPrivate true
	}{
		{"93.184.216.34", false, false},
		{"2606:2800:220:1:248:1893:25c8:1946", false, false},
		{"127.0.0.1", true, false},
		{"127.10.0.1", true, false},
		{"::1", true, false},
		{"::ffff:127.0.0.1", true, false},
		{"10.1.2.3", true, false},
		{"172.16.0.1", true, false},
		{"172.32.0.1", false, false},
		{"192.168.1.1", true, false},
		{"100.64.0.1", true, false},
		{"100.127.255.255", true, false},
		{"169.254.1.1", true, false},
		{"169.254.169.254", true, true},
		{"fd00:ec2::254", true, true},
		{"fe80::1", true, false},
		{"fc00::1", true, false},
		{"0.0.0.0", true, false},
		{"::", true, false},
		{"224.0.0.1", true, true},
		{"ff02::1", true, true},
		{"255.255.255.255", true, true},
		{"::1%1", true, false},
		{"::1%lo", true, false},
		{"fe80::1%eth0", true, false},
		{"fd00:ec2::254%eth0", true, true},
		{"64:ff9b::a00:1", true, false},      // NAT64 of 10.0.0.1
		{"64:ff9b::5db8:d822", false, false}, // NAT64 of 93.184.216.34
		{"2002:7f00:1::1", true, false},      // 6to4 of 127.0.0.1
		{"2002:a9fe:a9fe::1", true, true},    // 6to4 of 169.254.169.254
		{"::a00:1", true, false},             // IPv4-compatible 10.0.0.1
		{"192.0.2.10", true, false},          // documentation (TEST-NET-1)
		{"198.51.100.7", true, false},        // documentation (TEST-NET-2)
		{"203.0.113.200", true, false},       // documentation (TEST-NET-3)
		{"2001:db8::1", true, false},         // documentation
		{"100.100.100.200", true, true},      // Alibaba Cloud metadata
		{"::ffff:0:a00:1", true, false},      // SIIT of 10.0.0.1
		{"::ffff:0:7f00:1", true, false},     // SIIT of 127.0.0.1
		{"::ffff:0:a9fe:a9fe", true, true},   // SIIT of 169.254.169.254
		{"::ffff:0:5db8:d822", false, false}, // SIIT of 93.184.216.34
		// IANA IPv6 special-purpose ranges and space outside global unicast
		{"fec0::1", true, false},            // site-local (deprecated, RFC 3879)
		{"3fff::1", true, false},            // documentation (RFC 9637)
		{"2001::1", true, false},            // Teredo, IETF protocol assignments
		{"2001:2::1", true, false},          // benchmarking
		{"2001:20::1", true, false},         // ORCHIDv2
		{"100::1", true, false},             // discard-only
		{"5f00::1", true, false},            // SRv6 SIDs
		{"4000::1", true, false},            // not global unicast
		{"2620:4f:8000::1", true, false},    // AS112
		{"192.88.99.1", true, false},        // 6to4 relay anycast (deprecated)
		{"192.31.196.1", true, false},       // AS112-v4
		{"2002:5db8:d822::1", false, false}, // 6to4 of 93.184.216.34: judged as it
	} {
		ip := netip.MustParseAddr(tc.ip)
		if err := CheckTargetIP(ip, false); (err != nil) != tc.blocked || (err != nil && !errors.Is(err, ErrBlockedTarget)) {
			t.Errorf("CheckTargetIP(%s, false) = %v, want blocked %v", tc.ip, err, tc.blocked)
		}
		if err := CheckTargetIP(ip, true); (err != nil) != tc.blockedAllow {
			t.Errorf("CheckTargetIP(%s, true) = %v, want blocked %v", tc.ip, err, tc.blockedAllow)
		}
	}
}

func TestCheckWebhookURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://example.com/hook?x=1", true},
		{"http://hooks.example.com:8080/", true},
		{"http://[2606:2800:220:1::1]/", true},
		{"", false},
		{"example.com/hook", false},
		{"javascript:alert(1)", false},
		{"https:///nohost", false},
		{"https://user:pass@example.com/", false},
		{"http://127.0.0.1/", false},
		{"http://[::1]/", false},
		{"http://169.254.169.254/latest/meta-data", false},
		{"http://10.0.0.5/", false},
		{"http://localhost:8080/", false},
		{"http://api.localhost/", false},
		{"http://2130706433/", false},
		{"http://0x7f.0.0.1/", false},
		{"http://[::ffff:10.0.0.1]/", false},
		{"http://[::1%251]:8080/", false},
		{"http://[64:ff9b::a00:1]/", false},
	} {
		if err := CheckWebhookURL(tc.url, false); (err == nil) != tc.ok {
			t.Errorf("CheckWebhookURL(%q) = %v, want ok %v", tc.url, err, tc.ok)
		}
	}
}

func TestTriggerRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("creates a manual run and its job", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.MaxAttempts = 4 })
		run, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Trigger != TriggerManual || run.Status != StatusQueued || run.TaskID != task.ID || time.Since(run.ScheduledFor) > time.Minute {
			t.Fatalf("run = %+v", run)
		}
		rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), RunArgs{RunID: run.ID, TaskID: task.ID},
			&rivertest.RequireInsertedOpts{MaxAttempts: 4, Queue: river.QueueDefault})
		if got := b.get(t, task.ID); got.RunCount != 1 || got.LastRunAt == nil {
			t.Fatalf("task after trigger: %+v", got)
		}
	})
	t.Run("overlap skip conflicts while a run is active", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		if _, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID); err != nil {
			t.Fatal(err)
		}
		_, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		if !errors.Is(err, ErrRunActive) || !errors.Is(err, db.ErrConflict) {
			t.Fatalf("second trigger: %v, want ErrRunActive", err)
		}
		if runs := b.runs(t, task.ID); len(runs) != 1 {
			t.Fatalf("%d runs after a refused trigger", len(runs))
		}
		if _, err := b.pool.Exec(ctx, `UPDATE task_runs SET status = 'succeeded'`); err != nil {
			t.Fatal(err)
		}
		if _, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID); err != nil {
			t.Fatalf("trigger after the run finished: %v", err)
		}
	})
	t.Run("overlap allow runs side by side", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
		for range 3 {
			if _, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID); err != nil {
				t.Fatal(err)
			}
		}
		if runs := b.runs(t, task.ID); len(runs) != 3 {
			t.Fatalf("%d runs, want 3", len(runs))
		}
	})
	t.Run("another owner's task is not found", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t)
		other := dbtest.User(t, b.pool, nil).ID
		for _, id := range []string{task.ID, "not-a-uuid", "7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11"} {
			if _, err := TriggerRun(ctx, b.pool, b.river, other, id); !errors.Is(err, db.ErrNotFound) {
				t.Fatalf("trigger %s as another user: %v, want not found", id, err)
			}
		}
	})
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	var want []string
	for range 7 {
		want = append([]string{b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow }).ID}, want...)
	}
	other := dbtest.User(t, b.pool, nil).ID
	b.task(t, func(t *Task) { t.OwnerID, t.ProjectID = other, "" }) // never shows up
	var got []string
	page := Page{Limit: 3}
	for {
		items, next, err := ListTasks(ctx, b.pool, b.project, page, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			got = append(got, it.ID)
		}
		if next == "" {
			break
		}
		page.Cursor = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tasks newest first:\n got %v\nwant %v", got, want)
	}
	if _, _, err := ListTasks(ctx, b.pool, b.project, Page{Cursor: "garbage"}, ""); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}

	var runs []string
	for range 5 {
		r, err := TriggerRun(ctx, b.pool, b.river, b.project, want[0])
		if err != nil {
			t.Fatal(err)
		}
		runs = append([]string{r.ID}, runs...)
	}
	items, next, err := ListRuns(ctx, b.pool, b.project, want[0], Page{Limit: 4})
	if err != nil || len(items) != 4 || next == "" {
		t.Fatalf("first page: %d items, next %q, %v", len(items), next, err)
	}
	rest, next2, err := ListRuns(ctx, b.pool, b.project, want[0], Page{Limit: 4, Cursor: next})
	if err != nil || len(rest) != 1 || next2 != "" {
		t.Fatalf("second page: %d items, next %q, %v", len(rest), next2, err)
	}
	for i, r := range append(items, rest...) {
		if r.ID != runs[i] {
			t.Fatalf("runs not newest first at %d", i)
		}
	}
}

func TestUpdateTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
	due := time.Now().Add(-time.Second).Truncate(time.Second)
	b.dueAt(t, task.ID, due)

	name := "renamed"
	got, err := UpdateTask(ctx, b.pool, b.project, task.ID, TaskPatch{Name: &name}, false)
	if err != nil || got.Name != name || !got.NextRunAt.Equal(due) {
		t.Fatalf("rename: %v; next %v (a pending tick must survive an unrelated edit)", err, got.NextRunAt)
	}
	for pname, noop := range map[string]TaskPatch{"empty": {}, "same values": {Name: &name, Schedule: &task.Schedule}} {
		same, err := UpdateTask(ctx, b.pool, b.project, task.ID, noop, false)
		if err != nil || !same.UpdatedAt.Equal(got.UpdatedAt) || !b.get(t, task.ID).UpdatedAt.Equal(got.UpdatedAt) || !same.NextRunAt.Equal(due) {
			t.Fatalf("%s patch: %v; updated_at %v, was %v", pname, err, same.UpdatedAt, got.UpdatedAt)
		}
	}
	sched, tz := "0 9 * * *", "Asia/Tokyo"
	got, err = UpdateTask(ctx, b.pool, b.project, task.ID, TaskPatch{Schedule: new(&sched), Timezone: &tz}, false)
	if err != nil {
		t.Fatal(err)
	}
	if loc, _ := time.LoadLocation(tz); got.NextRunAt.In(loc).Hour() != 9 || !got.NextRunAt.After(time.Now()) || !got.UpdatedAt.After(task.UpdatedAt) {
		t.Fatalf("new schedule: next %v, want 09:00 Tokyo", got.NextRunAt)
	}
	off := false
	if got, err = UpdateTask(ctx, b.pool, b.project, task.ID, TaskPatch{Active: &off}, false); err != nil || got.NextRunAt != nil || got.Active {
		t.Fatalf("deactivate: %v, next %v", err, got.NextRunAt)
	}
	bad := "nope"
	if _, err := UpdateTask(ctx, b.pool, b.project, task.ID, TaskPatch{Schedule: new(&bad)}, false); err == nil {
		t.Fatal("bad schedule accepted")
	}
	if got := b.get(t, task.ID); *got.Schedule != sched {
		t.Fatalf("a rejected patch changed the task: %q", *got.Schedule)
	}
	other := dbtest.User(t, b.pool, nil).ID
	if _, err := UpdateTask(ctx, b.pool, other, task.ID, TaskPatch{Name: &name}, false); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("another owner's patch: %v", err)
	}
	if err := DeleteTask(ctx, b.pool, other, task.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("another owner's delete: %v", err)
	}
	if err := DeleteTask(ctx, b.pool, b.project, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := GetTask(ctx, b.pool, b.project, task.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}
