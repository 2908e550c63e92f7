// Command nsforward makes TCP ports inside a network namespace reachable from the namespace it is
// started in (the harness's, usually the root one), without adding any interface or route there:
// it listens on 127.0.0.1 in its own namespace and dials each target from an OS thread that has
// joined the target namespace (a socket belongs to the namespace of the thread that created it;
// setns(2), CLONE_NEWNET).
//
// Usage: nsforward --netns /run/netns/NAME TARGET [TARGET ...]     TARGET = host:port inside NAME
// Prints one JSON line {"TARGET": "127.0.0.1:PORT", ...} once every listener is open, then serves
// until stdin closes or it gets SIGTERM/SIGINT (so it never outlives the harness that started it).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type dialRequest struct {
	target string
	reply  chan dialResult
}

type dialResult struct {
	conn net.Conn
	err  error
}

// dialer serves dial requests from a goroutine locked to a thread inside the target namespace.
// The thread is never unlocked, so the Go runtime discards it when the goroutine ends.
func dialer(nsPath string, requests <-chan dialRequest, ready chan<- error) {
	runtime.LockOSThread()
	f, err := os.Open(nsPath)
	if err != nil {
		ready <- err
		return
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		ready <- fmt.Errorf("setns %s: %w", nsPath, err)
		return
	}
	ready <- nil
	d := net.Dialer{Timeout: 5 * time.Second}
	for req := range requests {
		c, err := d.Dial("tcp", req.target)
		req.reply <- dialResult{c, err}
	}
}

func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

func main() {
	nsPath := flag.String("netns", "", "path of the target network namespace (e.g. /run/netns/NAME)")
	dialers := flag.Int("dialers", 4, "threads dialing inside the namespace")
	flag.Parse()
	if *nsPath == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: nsforward --netns /run/netns/NAME host:port [host:port ...]")
		os.Exit(2)
	}
	requests := make(chan dialRequest)
	for i := 0; i < *dialers; i++ {
		ready := make(chan error, 1)
		go dialer(*nsPath, requests, ready)
		if err := <-ready; err != nil {
			fmt.Fprintln(os.Stderr, "nsforward:", err)
			os.Exit(1)
		}
	}
	ports := map[string]string{}
	for _, target := range flag.Args() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "nsforward: listen:", err)
			os.Exit(1)
		}
		ports[target] = l.Addr().String()
		go func(l net.Listener, target string) {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					reply := make(chan dialResult, 1)
					requests <- dialRequest{target, reply}
					r := <-reply
					if r.err != nil {
						fmt.Fprintf(os.Stderr, "nsforward: dial %s: %v\n", target, r.err)
						c.Close()
						return
					}
					pipe(c, r.conn)
				}()
			}
		}(l, target)
	}
	out, _ := json.Marshal(ports)
	fmt.Println(string(out))

	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
}
