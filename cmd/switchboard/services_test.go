package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// recorded is a list of services that write what they do to log.
func recorded(log *[]string, names string, failing byte) []service {
	var list []service
	for i := range len(names) {
		name := names[i : i+1]
		list = append(list, service{name: name,
			start: func(context.Context) error {
				*log = append(*log, "start "+name)
				if names[i] == failing {
					return errors.New("boom")
				}
				return nil
			},
			stop: func(context.Context) { *log = append(*log, "stop "+name) }})
	}
	return list
}

func TestServices(t *testing.T) {
	t.Parallel()

	t.Run("StartInOrderStopInReverseOnce", func(t *testing.T) {
		t.Parallel()
		var log []string
		s := &services{list: recorded(&log, "abc", 0)}
		if err := s.startAll(context.Background(), time.Second); err != nil {
			t.Fatal(err)
		}
		s.stopAll(context.Background())
		s.stopAll(context.Background())
		if want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}; !slices.Equal(log, want) {
			t.Fatalf("%v, want %v", log, want)
		}
	})

	t.Run("AFailedStartStopsTheOnesBeforeIt", func(t *testing.T) {
		t.Parallel()
		var log []string
		s := &services{list: recorded(&log, "abc", 'b')}
		if err := s.startAll(context.Background(), time.Second); err == nil || err.Error() != "start b: boom" {
			t.Fatalf("error %v", err)
		}
		s.stopAll(context.Background())
		if want := []string{"start a", "start b", "stop a"}; !slices.Equal(log, want) {
			t.Fatalf("%v, want %v", log, want)
		}
	})
}
