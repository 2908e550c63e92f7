package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
)

// ipam hands out pod IPs from the node's pod CIDR, round-robin (a released address is reused as
// late as possible, so a stale conntrack entry or a late packet does not reach a new pod).
type ipam struct {
	mu    sync.Mutex
	base  uint32
	size  uint32
	next  uint32
	inUse map[uint32]bool
}

func newIPAM(cidr *net.IPNet) *ipam {
	ones, bits := cidr.Mask.Size()
	return &ipam{base: binary.BigEndian.Uint32(cidr.IP.To4()), size: 1 << uint(bits-ones), next: 2, inUse: map[uint32]bool{}}
}

func (a *ipam) allocate() (net.IP, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// .0 network, .1 reserved (gateway by convention), last = broadcast.
	for i := uint32(0); i < a.size; i++ {
		off := a.next
		a.next++
		if a.next >= a.size-1 {
			a.next = 2
		}
		if off < 2 || off >= a.size-1 || a.inUse[off] {
			continue
		}
		a.inUse[off] = true
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, a.base+off)
		return ip, nil
	}
	return nil, fmt.Errorf("pod CIDR exhausted (%d addresses in use)", len(a.inUse))
}

func (a *ipam) release(ip net.IP) {
	v4 := ip.To4()
	if v4 == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inUse, binary.BigEndian.Uint32(v4)-a.base)
}

// ipIndex: the host-side veth is named after the address's offset in the /16 (unique while the
// address is in use; interface names are at most 15 bytes).
func ipIndex(ip net.IP) int {
	v4 := ip.To4()
	return int(v4[2])<<8 | int(v4[3])
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupPodNetwork: a network namespace with eth0 = podIP/32 and a default route via the node IP
// (on-link), the other veth end in the node namespace (where this process runs) with a /32 route
// to the pod, as the CNI ptp plugin lays it out. The node answers ARP for its own IP on the veth
// (arp_ignore=0), so no gateway address is needed on the node side.
func setupPodNetwork(netns, hostIf string, podIP, nodeIP net.IP) (err error) {
	if err := ipCmd("netns", "add", netns); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = teardownPodNetwork(netns, hostIf, podIP)
		}
	}()
	steps := [][]string{
		{"link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", netns},
		{"link", "set", hostIf, "up"},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "addr", "add", podIP.String() + "/32", "dev", "eth0"},
		{"-n", netns, "link", "set", "eth0", "up"},
		{"-n", netns, "route", "add", nodeIP.String() + "/32", "dev", "eth0", "scope", "link"},
		{"-n", netns, "route", "add", "default", "via", nodeIP.String(), "dev", "eth0", "onlink"},
		{"route", "add", podIP.String() + "/32", "dev", hostIf, "scope", "link"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return err
		}
	}
	return nil
}

// teardownPodNetwork deletes the namespace (its eth0 and so the veth pair go with it) and the
// node-side route and veth should either survive.
func teardownPodNetwork(netns, hostIf string, podIP net.IP) error {
	var errs []string
	_ = ipCmd("route", "del", podIP.String()+"/32", "dev", hostIf)
	_ = ipCmd("link", "del", hostIf)
	if err := ipCmd("netns", "del", netns); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
