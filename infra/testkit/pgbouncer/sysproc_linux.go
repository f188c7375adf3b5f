package pgbouncer

import "syscall"

// sysProcAttr runs PgBouncer in its own process group, as cred, and has
// the kernel stop it if we die.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Credential: cred}
}
