package main

import "slices"

// dbKey is a task_run_keys row: the run an idempotency key made.
type dbKey struct {
	TaskID, Key, RunID string
}

// keyStats count the triggers.
type keyStats struct {
	keys, doubled, acked, runs int
}

// checkKeys checks one run per idempotency key: every answer for a key
// named the same run, which is the run the database holds for the key, and
// the on-demand tasks have no run that no key made. odRuns are every run
// of the on-demand tasks.
func checkKeys(sent []keyedTrigger, keys []dbKey, odRuns []dbRun) (keyStats, []violation) {
	st := keyStats{keys: len(sent), runs: len(odRuns)}
	runOfKey := map[string]string{}
	keyed := map[string]bool{}
	for _, k := range keys {
		runOfKey[k.TaskID+"\x00"+k.Key] = k.RunID
		keyed[k.RunID] = true
	}
	var vs []violation
	for _, kt := range sent {
		if kt.sends > 1 {
			st.doubled++
		}
		vs = append(vs, checkKey(kt, runOfKey[kt.task+"\x00"+kt.key], &st)...)
	}
	for _, r := range odRuns {
		if !keyed[r.ID] {
			vs = append(vs, violate("key_extra_run", "run %s of on-demand task %s was made by no key (a key that made two runs?)", r.ID, r.TaskID))
		}
	}
	return st, vs
}

func checkKey(kt keyedTrigger, stored string, st *keyStats) []violation {
	var vs []violation
	for _, f := range kt.failures {
		vs = append(vs, violate("key_refused", "key %s: a trigger was never acknowledged: %s", kt.key, f))
	}
	if len(kt.runs) == 0 {
		return vs
	}
	st.acked++
	if slices.ContainsFunc(kt.runs, func(id string) bool { return id != kt.runs[0] }) {
		vs = append(vs, violate("key_two_runs", "key %s: the answers named different runs %v", kt.key, kt.runs))
	}
	if stored != kt.runs[0] {
		vs = append(vs, violate("key_not_stored", "key %s: acknowledged with run %s, but the database holds %q for it", kt.key, kt.runs[0], stored))
	}
	return vs
}
