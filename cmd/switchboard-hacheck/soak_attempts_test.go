package main

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// history is a run's calls and attempt records, built one attempt at a
// time in the order things happened (one second apart).
type history struct {
	run      dbRun
	calls    []call
	attempts []dbAttempt
	now      float64
}

func newHistory(id string) *history {
	return &history{run: dbRun{ID: id, Status: "queued"}}
}

func (h *history) tick() time.Time { h.now++; return at(h.now) }

// call makes the target's call of attempt n and returns its excerpt.
func (h *history) call(n, status int) string {
	seq := int64(len(h.calls))
	h.calls = append(h.calls, call{Seq: seq, RunID: h.run.ID, Attempt: n, Status: status, At: h.tick(), Replica: 0})
	return fmt.Sprintf(`{"call":%d}`, seq)
}

// record writes attempt n's record with the answer of excerpt (none: "").
func (h *history) record(n int, status string, started time.Time, httpStatus int, excerpt string) {
	a := dbAttempt{RunID: h.run.ID, Attempt: n, Status: status, StartedAt: started, FinishedAt: ptr(h.tick())}
	if excerpt != "" {
		a.HTTPStatus, a.Excerpt = ptr(httpStatus), ptr(excerpt)
	}
	h.attempts = append(h.attempts, a)
}

// finish makes the run final on attempt n with the answer of excerpt.
func (h *history) finish(n int, status, excerpt string) {
	h.run.Status, h.run.Attempt, h.run.Excerpt = status, n, ptr(excerpt)
}

func TestCheckAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		build func(h *history)
		want  []string
	}{
		{"one attempt", func(h *history) {
			s := h.tick()
			e := h.call(1, 200)
			h.record(1, "succeeded", s, 200, e)
			h.finish(1, "succeeded", e)
		}, nil},
		{"a retry after a 503", func(h *history) {
			s := h.tick()
			e := h.call(1, 503)
			h.record(1, "failed", s, 503, e)
			s = h.tick()
			e = h.call(2, 200)
			h.record(2, "succeeded", s, 200, e)
			h.finish(2, "succeeded", e)
		}, nil},
		{"rescued from a stopped node; its late write refused", func(h *history) {
			s := h.tick()
			h.call(1, 200) // answered while its node slept
			h.record(1, "interrupted", s, 0, "")
			s = h.tick()
			e := h.call(2, 200)
			h.record(2, "succeeded", s, 200, e)
			h.finish(2, "succeeded", e)
		}, nil},
		{"the late worker overwrote the rescued attempt's record", func(h *history) {
			s1 := h.tick()
			late := h.call(1, 200)
			s2 := h.tick()
			e := h.call(2, 200)
			h.record(2, "succeeded", s2, 200, e)
			h.record(1, "succeeded", s1, 200, late) // written after attempt 2 started
			h.finish(2, "succeeded", e)
		}, []string{"attempt_late_write"}},
		{"the late worker overwrote the run", func(h *history) {
			s := h.tick()
			late := h.call(1, 200)
			h.record(1, "interrupted", s, 0, "")
			s = h.tick()
			e := h.call(2, 200)
			h.record(2, "succeeded", s, 200, e)
			h.finish(2, "succeeded", late)
		}, []string{"run_disagrees"}},
		{"an attempt called twice", func(h *history) {
			s := h.tick()
			h.call(1, 200)
			e := h.call(1, 200)
			h.record(1, "succeeded", s, 200, e)
			h.finish(1, "succeeded", e)
		}, []string{"attempt_called_twice"}},
		{"an attempt holds another attempt's answer", func(h *history) {
			s := h.tick()
			e1 := h.call(1, 503)
			h.record(1, "failed", s, 503, e1)
			s = h.tick()
			h.call(2, 200)
			h.record(2, "succeeded", s, 200, e1)
			h.finish(2, "succeeded", e1)
		}, []string{"attempt_overwritten"}},
		{"a status the target never gave", func(h *history) {
			s := h.tick()
			e := h.call(1, 200)
			h.record(1, "failed", s, 503, e)
			h.finish(1, "failed", e)
		}, []string{"attempt_wrong_status"}},
		{"an answer the target never gave", func(h *history) {
			s := h.tick()
			h.call(1, 200)
			h.record(1, "succeeded", s, 200, `{"call":99}`)
			h.finish(1, "succeeded", `{"call":99}`)
		}, []string{"attempt_foreign_answer"}},
		{"a call never recorded", func(h *history) {
			s := h.tick()
			e := h.call(1, 200)
			h.call(2, 200)
			h.record(1, "succeeded", s, 200, e)
			h.finish(1, "succeeded", e)
		}, []string{"attempt_unrecorded"}},
		{"a run on an attempt its records do not reach", func(h *history) {
			s := h.tick()
			e := h.call(1, 200)
			h.record(1, "succeeded", s, 200, e)
			h.finish(2, "succeeded", e)
		}, []string{"run_disagrees"}},
		{"failed with its attempts spent by rescues", func(h *history) {
			h.record(1, "interrupted", h.tick(), 0, "")
			h.run.Status, h.run.Attempt = "failed", 1
		}, nil},
		{"finished by the reconciliation (checkFinal reports it)", func(h *history) {
			s := h.tick()
			h.call(1, 200)
			h.record(1, "interrupted", s, 0, "")
			h.run.Status, h.run.Attempt, h.run.Error = "succeeded", 1, ptr("reconciled: the run's job ended completed but its outcome was never recorded")
		}, nil},
		{"succeeded with no attempt", func(h *history) {
			h.run.Status, h.run.Attempt = "succeeded", 1
		}, []string{"run_without_attempts"}},
	} {
		h := newHistory("r1")
		tc.build(h)
		_, vs := checkAttempts([]dbRun{h.run}, h.attempts, h.calls)
		if got := kinds(vs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: violations %v, want %v (%v)", tc.name, got, tc.want, vs)
		}
	}
}

func TestCheckKeys(t *testing.T) {
	t.Parallel()
	sent := []keyedTrigger{
		{key: "a", task: "t1", sends: 1, runs: []string{"ra"}},
		{key: "b", task: "t1", sends: 2, runs: []string{"rb", "rb"}},
		{key: "c", task: "t2", sends: 2, runs: []string{"rc", "rc2"}},
		{key: "d", task: "t2", sends: 1, failures: []string{"gave up"}},
		{key: "e", task: "t2", sends: 1, runs: []string{"re"}},
	}
	keys := []dbKey{{"t1", "a", "ra"}, {"t1", "b", "rb"}, {"t2", "c", "rc"}, {"t2", "e", "other"}}
	runs := []dbRun{{ID: "ra", TaskID: "t1"}, {ID: "rb", TaskID: "t1"}, {ID: "rc", TaskID: "t2"}, {ID: "rc2", TaskID: "t2"}, {ID: "other", TaskID: "t2"}}
	st, vs := checkKeys(sent, keys, runs)
	want := []string{"key_extra_run", "key_not_stored", "key_refused", "key_two_runs"}
	if got := kinds(vs); !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v (%v)", got, want, vs)
	}
	if st.keys != 5 || st.doubled != 2 || st.acked != 4 || st.runs != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestAuditStream(t *testing.T) {
	t.Parallel()
	ev := func(id string, off int64) streamEvent {
		return streamEvent{Stream: "user:u", Offset: off, Epoch: "e1", ID: id}
	}
	acked := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name string
		evs  []streamEvent
		want streamAudit
	}{
		{"all once in order", []streamEvent{ev("a", 1), ev("b", 2), ev("c", 3)}, streamAudit{}},
		{"one missing", []streamEvent{ev("a", 1), ev("b", 2)}, streamAudit{missing: 1}},
		{"one twice", []streamEvent{ev("a", 1), ev("b", 2), ev("b", 2), ev("c", 3)}, streamAudit{dup: 1, badOffsets: 1}},
		{"a gap in offsets", []streamEvent{ev("a", 1), ev("b", 3), ev("c", 4)}, streamAudit{badOffsets: 1}},
		{"an event never acknowledged", []streamEvent{ev("a", 1), ev("b", 2), ev("x", 3), ev("c", 4)}, streamAudit{unknown: 1}},
		{"another stream", []streamEvent{ev("a", 1), {Stream: "user:v", Offset: 2, Epoch: "e1", ID: "b"}, ev("c", 3)}, streamAudit{badOffsets: 1}},
	} {
		got := auditStream(tc.evs, acked, "user:u")
		got.firstBad = ""
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestAnswerFor(t *testing.T) {
	t.Parallel()
	retried, twice, cronOK := 0, 0, true
	for i := range 4000 {
		id := fmt.Sprintf("run-%d", i)
		a1, a2, a3 := answerFor("/od/0", id, 1), answerFor("/od/0", id, 2), answerFor("/od/0", id, 3)
		if a1 != answerFor("/od/1", id, 1) {
			t.Fatalf("%s: attempt 1 answered differently on another call", id)
		}
		if a1.status == http.StatusServiceUnavailable {
			retried++
		}
		if a2.status == http.StatusServiceUnavailable {
			twice++
			if a1.status != http.StatusServiceUnavailable {
				t.Errorf("%s: attempt 2 refused without attempt 1", id)
			}
		}
		if a3.status != http.StatusOK || a1.delay < 300*time.Millisecond || a1.delay >= 3*time.Second {
			t.Errorf("%s: attempt 3 %d, delay %s", id, a3.status, a1.delay)
		}
		if c := answerFor("/cron/0", id, 1); c.status != http.StatusOK || c.delay >= 800*time.Millisecond {
			cronOK = false
		}
	}
	if retried < 800 || retried > 1200 || twice < 50 || twice > 150 || !cronOK {
		t.Errorf("of 4000 runs, %d refused attempt 1 (want about 1000) and %d attempt 2 too (about 100); cron always 200: %v", retried, twice, cronOK)
	}
}

func TestCallOfExcerpt(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{`{"call":0}`: 0, `{"call":1234}`: 1234} {
		if got, ok := callOfExcerpt(in); !ok || got != want {
			t.Errorf("callOfExcerpt(%s) = %d %v", in, got, ok)
		}
	}
	for _, in := range []string{"", `{"ok":true}`, `{"call":"x"}`, "<html>"} {
		if _, ok := callOfExcerpt(in); ok {
			t.Errorf("callOfExcerpt(%q) read a call", in)
		}
	}
}
