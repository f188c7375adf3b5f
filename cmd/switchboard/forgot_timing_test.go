package main

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/mailtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// TestForgotPasswordTiming: POST /v1/auth/forgot takes as long for an
// address with an account as for one without: 50 tries of each,
// interleaved, and the medians within 10 % of each other. Every try names
// another address, so the limit of mails per address never makes the two
// alike. The lookup, the link and the mail happen after the answer; were
// any of them in the request, the known addresses' median would be the
// larger by database round trips and an SMTP exchange. A round whose
// medians differ by more is measured again (at most three rounds): load
// from other processes moves single requests either way, but a difference
// the code makes is in every round, on the same side.
func TestForgotPasswordTiming(t *testing.T) {
	t.Parallel()
	smtp := mailtest.Start(t, mailtest.Options{})
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.SMTPURL = smtp.URL("no-reply@example.com")
	srv := startServer(t, cfg)
	const tries = 50
	for i := range 3 * tries {
		dbtest.User(t, srv.pool, &dbtest.UserOpts{Email: fmt.Sprintf("known-%d@example.com", i)})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	forgot := func(email string) time.Duration {
		body := []byte(`{"email":"` + email + `"}`)
		start := time.Now()
		res, err := client.Post(srv.URL+"/v1/auth/forgot", "application/json", bytes.NewReader(body))
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("forgot %s: %d", email, res.StatusCode)
		}
		return took
	}
	// handled counts the forgot requests whose work after the answer is
	// done. Each try waits for the one before to be handled, so no try
	// shares the replica with the lookup and mail of the last (that made
	// every unknown address, measured right after a known one, the slower).
	asked := 0
	// Read from the registry, not by scraping /metrics: a scrape per poll
	// would load the machine whose timing is measured.
	handled := func() bool {
		families, err := srv.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		done := 0.0
		for _, f := range families {
			if f.GetName() == "switchboard_password_reset_mails_total" {
				for _, m := range f.GetMetric() {
					done += m.GetCounter().GetValue()
				}
			}
		}
		return done >= float64(asked)
	}
	measure := func(email string) time.Duration {
		testwait.For(t, 30*time.Second, "the last forgot request handled", handled)
		asked++
		return forgot(email)
	}
	measure("warm-up@example.com")
	var diff float64
	slower := map[bool]int{} // rounds more than 10 % apart, by whether known was the slower
	for round := 1; round <= 3; round++ {
		var known, unknown []time.Duration
		for i := range tries {
			n := (round-1)*tries + i
			known = append(known, measure(fmt.Sprintf("known-%d@example.com", n)))
			unknown = append(unknown, measure(fmt.Sprintf("unknown-%d@example.com", n)))
		}
		mk, mu := median(known), median(unknown)
		diff = float64(max(mk, mu)-min(mk, mu)) / float64(min(mk, mu))
		t.Logf("round %d, %d tries each: median known %s, unknown %s (%.1f %% apart); min %s / %s, max %s / %s",
			round, tries, mk, mu, 100*diff, slices.Min(known), slices.Min(unknown), slices.Max(known), slices.Max(unknown))
		if diff <= 0.10 {
			return
		}
		slower[mk > mu]++
	}
	if slower[true] == 3 || slower[false] == 3 {
		t.Fatalf("the medians stayed more than 10 %% apart, the same side slower, over three rounds (last %.1f %%): the answer's time tells whether an account exists", 100*diff)
	}
	t.Logf("the rounds differed by more than 10 %%, but not the same way each time: load, not the code")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
