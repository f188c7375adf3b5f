package pgembed

import "syscall"

// sysProcAttr runs postgres in its own process group (a terminal's Ctrl-C
// reaches us, and we stop postgres after draining), as acct when we are
// root, and — unless detached — has the kernel stop it if we die.
func sysProcAttr(acct *account, dieWithParent bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		a.Pdeathsig = syscall.SIGINT
	}
	if acct != nil {
		a.Credential = acct.credential()
	}
	return a
}
