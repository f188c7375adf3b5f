//go:build !linux

package pgembed

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; Stop is still
// called on every orderly shutdown.
func sysProcAttr(acct *account, _ bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if acct != nil {
		a.Credential = acct.credential()
	}
	return a
}
