package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

func statPath(p string) (os.FileInfo, error) { return os.Stat(p) }

// runContainer is `process-kubelet run-container SPEC.json`, started by the kubelet through
// `ip netns exec <pod netns>` (which has already given it the pod's network namespace, a private
// mount namespace and /etc/netns/<pod>/{resolv.conf,hosts} over /etc). It adds a UTS namespace with
// the pod's hostname, bind-mounts the volumes onto their mountPaths (private: gone when the
// container's processes are), changes to the working directory and execs the container's command
// with exactly the container's environment.
func runContainer(args []string) {
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "process-kubelet run-container: "+format+"\n", a...)
		os.Exit(128)
	}
	if len(args) != 1 {
		fail("usage: run-container SPEC.json")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fail("%v", err)
	}
	var spec containerSpecFile
	if err := json.Unmarshal(b, &spec); err != nil {
		fail("%s: %v", args[0], err)
	}
	if len(spec.Argv) == 0 {
		fail("no command")
	}
	// Namespaces are per thread until exec: do all of it on this one.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWUTS); err != nil {
		fail("unshare: %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		fail("make / rslave: %v", err)
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			fail("sethostname: %v", err)
		}
	}
	for _, m := range spec.Mounts {
		if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			fail("bind mount %s on %s: %v", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
				fail("remount %s read-only: %v", m.Target, err)
			}
		}
	}
	if err := os.Chdir(spec.WorkingDir); err != nil {
		fail("working directory: %v", err)
	}
	path := spec.Argv[0]
	if !strings.Contains(path, "/") {
		for _, kv := range spec.Env {
			if strings.HasPrefix(kv, "PATH=") {
				os.Setenv("PATH", kv[len("PATH="):])
			}
		}
		lp, err := exec.LookPath(path)
		if err != nil {
			fail("%s: %v", path, err)
		}
		path = lp
	}
	err = unix.Exec(path, spec.Argv, spec.Env)
	fail("exec %s: %v", path, err)
}
