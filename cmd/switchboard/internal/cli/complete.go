package cli

import (
	"github.com/spf13/cobra"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

// completeIDs offers the ids list returns, each described, to shell
// completion of a command's first argument; without a server or key, or
// when the server does not answer, it offers nothing.
func (a *app) completeIDs(cmd *cobra.Command, got []string, list func(*apiclient.Client) []cobra.Completion) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(got) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cl, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return list(cl), cobra.ShellCompDirectiveNoFileComp
}

// completeTasks offers the project's task ids with their names.
func (a *app) completeTasks(cmd *cobra.Command, got []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return a.completeIDs(cmd, got, func(cl *apiclient.Client) (out []cobra.Completion) {
		p, _ := cl.Tasks(cmd.Context(), apiclient.ListOptions{Limit: 100})
		for _, t := range p.Items {
			out = append(out, cobra.CompletionWithDesc(t.ID, t.Name))
		}
		return out
	})
}

// completeRuns offers the latest runs' ids with their status.
func (a *app) completeRuns(cmd *cobra.Command, got []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return a.completeIDs(cmd, got, func(cl *apiclient.Client) (out []cobra.Completion) {
		p, _ := cl.Runs(cmd.Context(), "", apiclient.ListOptions{Limit: 100})
		for _, r := range p.Items {
			out = append(out, cobra.CompletionWithDesc(r.ID, r.Status+" "+r.ScheduledFor.Format("2006-01-02 15:04")))
		}
		return out
	})
}

// completeKeys offers the account's key ids with their names.
func (a *app) completeKeys(cmd *cobra.Command, got []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return a.completeIDs(cmd, got, func(cl *apiclient.Client) (out []cobra.Completion) {
		l, _ := cl.APIKeys(cmd.Context())
		for _, k := range l.Items {
			out = append(out, cobra.CompletionWithDesc(k.ID, k.Name))
		}
		return out
	})
}
