package jobs

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // zone rules inside the binary: static builds have no /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest @every interval a task may use.
const MinEvery = time.Second

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a task's cron expression evaluated in its IANA time zone.
//
// Expressions that name specific hours (`30 2 * * *`, `@daily`) fire once per
// wall-clock time across DST changes, as Vixie cron does: a time skipped by
// spring-forward fires at the first instant after the gap, a time repeated by
// fall-back fires only the first time. Expressions with `*` in the hour field
// (`0 * * * *`, `*/5 * * * *`) and `@every` follow real time.
type Schedule struct {
	inner     cron.Schedule
	loc       *time.Location
	fixedHour bool
}

// ParseSchedule parses spec (5-field cron, 6-field with leading seconds, a
// descriptor such as @hourly, or @every <duration> of at least 1s) in the
// time zone tz ("" means UTC). Errors say what to fix.
func ParseSchedule(spec, tz string) (*Schedule, error) {
	loc, err := LoadTimezone(tz)
	if err != nil {
		return nil, err
	}
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "":
		return nil, errors.New("schedule is empty: use a cron expression such as \"*/5 * * * *\", a descriptor such as \"@hourly\", or \"@every 1m\"")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return nil, errors.New("schedule: set the time zone with the timezone field, not a TZ= prefix")
	case strings.HasPrefix(spec, "@every"):
		if err := checkEvery(spec); err != nil {
			return nil, err
		}
	}
	inner, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q is not valid: %v (use 5 fields, 6 with leading seconds, a descriptor such as @hourly, or @every 1m)", spec, err)
	}
	s := &Schedule{inner: inner, loc: loc}
	if ss, ok := inner.(*cron.SpecSchedule); ok {
		s.fixedHour = ss.Hour&starBit == 0
	}
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("schedule %q never fires (no such date within five years)", spec)
	}
	return s, nil
}

// starBit is robfig/cron's marker for a field written as "*".
const starBit = 1 << 63

func checkEvery(spec string) error {
	d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(spec, "@every")))
	switch {
	case err != nil:
		return fmt.Errorf("schedule %q: @every takes a duration such as 30s, 5m or 1h30m", spec)
	case d < MinEvery:
		return fmt.Errorf("schedule %q: @every must be at least %s", spec, MinEvery)
	case d%time.Second != 0:
		return fmt.Errorf("schedule %q: @every takes whole seconds", spec)
	}
	return nil
}

// LoadTimezone resolves an IANA zone name; "" is UTC.
func LoadTimezone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, errors.New("timezone: name an IANA zone such as Europe/Paris, not Local")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timezone %q is not a known IANA zone (for example UTC, Europe/Paris, America/New_York)", tz)
	}
	return loc, nil
}

// Next returns the first tick strictly after t, in UTC, or the zero time if
// the schedule never fires again.
func (s *Schedule) Next(t time.Time) time.Time {
	t = t.In(s.loc)
	for range 4 {
		n := s.inner.Next(t)
		if n.IsZero() || !s.fixedHour {
			return n.UTC()
		}
		if g, ok := s.inGap(t, n); ok {
			return g.UTC()
		}
		if !repeatedWallTime(n) {
			return n.UTC()
		}
		t = n // the second pass of a fall-back hour: already fired
	}
	return time.Time{}
}

// inGap finds a tick that fell into a spring-forward gap between t and n:
// it fires at the instant the clocks jumped.
func (s *Schedule) inGap(t, n time.Time) (time.Time, bool) {
	_, offT := t.Zone()
	_, offN := n.Zone()
	if offN <= offT {
		return time.Time{}, false
	}
	lo, hi := t, n // find the first instant with the new offset
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if _, off := mid.Zone(); off == offT {
			lo = mid
		} else {
			hi = mid
		}
	}
	spec, ok := s.inner.(*cron.SpecSchedule)
	if !ok {
		return time.Time{}, false
	}
	// Evaluate the expression on a clock that never jumped: a tick before
	// the gap's end on that clock is a wall time the real clock skipped.
	old := *spec
	old.Location = time.FixedZone("", offT)
	m := old.Next(hi.Add(-time.Second).In(old.Location))
	gapEnd := hi.Add(time.Duration(offN-offT) * time.Second)
	if !m.IsZero() && m.After(t) && m.Before(gapEnd) {
		return hi, true
	}
	return time.Time{}, false
}

// repeatedWallTime reports whether n is the second occurrence of its wall
// clock time, in the hour a fall-back transition repeats.
func repeatedWallTime(n time.Time) bool {
	_, offN := n.Zone()
	_, offBefore := n.Add(-3 * time.Hour).Zone()
	if offBefore <= offN {
		return false
	}
	first := n.Add(-time.Duration(offBefore-offN) * time.Second)
	const wall = "2006-01-02 15:04:05"
	return first.Format(wall) == n.Format(wall)
}
