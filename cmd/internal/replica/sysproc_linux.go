package replica

import "syscall"

// childAttr has the kernel kill a replica if this program dies, so an
// interrupted run leaves no servers behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
