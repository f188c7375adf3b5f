//go:build !linux

package replica

import "syscall"

func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
