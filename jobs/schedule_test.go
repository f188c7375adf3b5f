package jobs

import (
	"strings"
	"testing"
	"time"
)

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec, tz string
		wantErr  string // substring; "" means valid
	}{
		{"*/5 * * * *", "UTC", ""},
		{"*/10 * * * * *", "", ""},
		{"@hourly", "Europe/Paris", ""},
		{"@daily", "America/New_York", ""},
		{"@every 1s", "", ""},
		{"@every 1h30m", "", ""},
		{"", "", "schedule is empty"},
		{"   ", "", "schedule is empty"},
		{"* * *", "", "is not valid"},
		{"61 * * * *", "", "is not valid"},
		{"* * * * * * *", "", "is not valid"},
		{"@fortnightly", "", "is not valid"},
		{"@every 500ms", "", "at least 1s"},
		{"@every 1500ms", "", "whole seconds"},
		{"@every soon", "", "takes a duration"},
		{"@every -5s", "", "at least 1s"},
		{"CRON_TZ=Asia/Tokyo * * * * *", "", "timezone field"},
		{"0 0 30 2 *", "", "never fires"},
		{"* * * * *", "Mars/Olympus", "not a known IANA zone"},
		{"* * * * *", "Local", "not Local"},
	} {
		_, err := ParseSchedule(tc.spec, tc.tz)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ParseSchedule(%q, %q): %v", tc.spec, tc.tz, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseSchedule(%q, %q) = %v, want error containing %q", tc.spec, tc.tz, err, tc.wantErr)
		}
	}
}

func TestScheduleNext(t *testing.T) {
	t.Parallel()
	const layout = "2006-01-02 15:04:05 MST"
	for _, tc := range []struct {
		name, spec, tz, from string
		want                 []string
	}{
		{
			name: "5 fields UTC", spec: "*/15 * * * *", tz: "UTC", from: "2024-05-01 10:07:00 UTC",
			want: []string{"2024-05-01 10:15:00 UTC", "2024-05-01 10:30:00 UTC", "2024-05-01 10:45:00 UTC"},
		},
		{
			name: "6 fields with seconds", spec: "*/20 * * * * *", tz: "UTC", from: "2024-05-01 10:00:05 UTC",
			want: []string{"2024-05-01 10:00:20 UTC", "2024-05-01 10:00:40 UTC", "2024-05-01 10:01:00 UTC"},
		},
		{
			name: "every 90s", spec: "@every 90s", tz: "UTC", from: "2024-05-01 10:00:00 UTC",
			want: []string{"2024-05-01 10:01:30 UTC", "2024-05-01 10:03:00 UTC"},
		},
		{
			name: "daily in a zone", spec: "@daily", tz: "Asia/Tokyo", from: "2024-05-01 10:00:00 UTC",
			want: []string{"2024-05-02 00:00:00 JST", "2024-05-03 00:00:00 JST"},
		},
		{
			name: "spring forward: skipped wall time fires when clocks jump", spec: "30 2 * * *", tz: "America/New_York",
			from: "2024-03-09 02:30:00 EST",
			want: []string{"2024-03-10 03:00:00 EDT", "2024-03-11 02:30:00 EDT", "2024-03-12 02:30:00 EDT"},
		},
		{
			name: "spring forward: hourly follows real time", spec: "0 * * * *", tz: "America/New_York",
			from: "2024-03-10 00:30:00 EST",
			want: []string{"2024-03-10 01:00:00 EST", "2024-03-10 03:00:00 EDT", "2024-03-10 04:00:00 EDT"},
		},
		{
			name: "spring forward: time outside the gap unaffected", spec: "0 0 4 * * *", tz: "Europe/Berlin",
			from: "2024-03-30 12:00:00 CET",
			want: []string{"2024-03-31 04:00:00 CEST", "2024-04-01 04:00:00 CEST"},
		},
		{
			name: "fall back: repeated wall time fires once", spec: "30 1 * * *", tz: "America/New_York",
			from: "2024-11-02 23:00:00 EDT",
			want: []string{"2024-11-03 01:30:00 EDT", "2024-11-04 01:30:00 EST", "2024-11-05 01:30:00 EST"},
		},
		{
			name: "fall back: hourly fires every real hour", spec: "0 * * * *", tz: "America/New_York",
			from: "2024-11-03 00:30:00 EDT",
			want: []string{"2024-11-03 01:00:00 EDT", "2024-11-03 01:00:00 EST", "2024-11-03 02:00:00 EST"},
		},
		{
			name: "fall back: every 30 minutes follows real time", spec: "*/30 * * * *", tz: "Europe/Berlin",
			from: "2024-10-27 02:10:00 CEST",
			want: []string{"2024-10-27 02:30:00 CEST", "2024-10-27 02:00:00 CET", "2024-10-27 02:30:00 CET", "2024-10-27 03:00:00 CET"},
		},
		{
			name: "fall back: daily once", spec: "@daily", tz: "America/Sao_Paulo",
			from: "2018-02-16 12:00:00 -02",
			want: []string{"2018-02-17 00:00:00 -02", "2018-02-18 00:00:00 -03"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSchedule(tc.spec, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			loc, _ := LoadTimezone(tc.tz)
			at, err := time.ParseInLocation(layout, tc.from, loc)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				at = s.Next(at)
				if got := at.In(loc).Format(layout); got != w {
					t.Fatalf("tick %d = %s, want %s", i, got, w)
				}
				if at.Location() != time.UTC {
					t.Fatalf("Next returned %v, want UTC", at.Location())
				}
			}
		})
	}
}
