package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// replicaOfPeer finds which replica process owns the client end of a
// loopback connection to our port serverPort, by the socket's inode in
// /proc/net/tcp* and the replicas' open file descriptors. A webhook call
// carries no sender identity, so this is how the checks know which replica
// ran a job. It answers -1 when it cannot tell (not Linux, process gone).
func (c *cluster) replicaOfPeer(remoteAddr string, serverPort int) int {
	_, p, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return -1
	}
	clientPort, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	inode := socketInode(clientPort, serverPort)
	if inode == "" {
		return -1
	}
	target := "socket:[" + inode + "]"
	for i, r := range c.replicas {
		pid := r.PID()
		if pid == 0 || !r.Running() {
			continue
		}
		fdDir := fmt.Sprintf("/proc/%d/fd", pid)
		entries, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && l == target {
				return i
			}
		}
	}
	return -1
}

// socketInode finds the inode of the TCP socket whose local port is
// localPort and remote port is remotePort.
func socketInode(localPort, remotePort int) string {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 {
				continue
			}
			if hexPort(fields[1]) == localPort && hexPort(fields[2]) == remotePort {
				return fields[9]
			}
		}
	}
	return ""
}

// hexPort reads the port of "0100007F:1F90".
func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	v, err := strconv.ParseInt(addr[i+1:], 16, 32)
	if err != nil {
		return -1
	}
	return int(v)
}
