//go:build !linux

package pgbouncer

import "syscall"

// sysProcAttr runs PgBouncer in its own process group, as cred.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
