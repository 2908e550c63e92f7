// Command process-kubelet is the e2e harness's node: a virtual-kubelet (v1.14.1, node/nodeutil)
// provider that runs every pod bound to its Node as local processes, one network namespace per
// pod (veth + /32 routes from the node namespace it runs in), and reports status the way a kubelet
// does (Pending → Running/Ready → on deletion SIGTERM, grace period, SIGKILL, terminal container
// states, removal). It has no images, cgroups or container isolation beyond network, mount and UTS
// namespaces: a container's `command` is run on the host's filesystem (see e2e/README.md).
//
// Usage: process-kubelet --kubeconfig F --node-name N --node-ip IP --pod-cidr CIDR --netns-prefix P
//
//	--state-dir D --cluster-dns IP --cluster-domain D
//
// Subcommand used by itself inside a pod's namespaces: process-kubelet run-container SPEC.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run-container" {
		runContainer(os.Args[2:]) // does not return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "process-kubelet:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg config
	var kubeconfig, podCIDR, nodeIP string
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the node identity (system:node:<name>)")
	flag.StringVar(&cfg.nodeName, "node-name", "node1", "Node name to register")
	flag.StringVar(&nodeIP, "node-ip", "", "the node's InternalIP (an address of the namespace this runs in)")
	flag.StringVar(&podCIDR, "pod-cidr", "10.244.0.0/24", "pod IPs are allocated from this range")
	flag.StringVar(&cfg.netnsPrefix, "netns-prefix", "", "pod network namespaces are named <prefix><pod uid>")
	flag.StringVar(&cfg.stateDir, "state-dir", "", "directory for pod volumes, logs and runtime records")
	flag.StringVar(&cfg.clusterDNS, "cluster-dns", "", "nameserver written to the pods' resolv.conf (dnsPolicy ClusterFirst)")
	flag.StringVar(&cfg.clusterDomain, "cluster-domain", "cluster.local", "cluster domain")
	flag.Parse()
	if kubeconfig == "" || nodeIP == "" || cfg.netnsPrefix == "" || cfg.stateDir == "" {
		return errors.New("--kubeconfig, --node-ip, --netns-prefix and --state-dir are required")
	}
	cfg.nodeIP = net.ParseIP(nodeIP).To4()
	if cfg.nodeIP == nil {
		return fmt.Errorf("--node-ip %q is not an IPv4 address", nodeIP)
	}
	_, cidr, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return fmt.Errorf("--pod-cidr: %w", err)
	}
	cfg.podCIDR = cidr
	if cfg.selfExe, err = os.Executable(); err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	vklog.L = vkslog.FromSlog(logger)

	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	restConfig.UserAgent = "process-kubelet/" + cfg.nodeName
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	var prov *provider
	n, err := nodeutil.NewNode(cfg.nodeName, func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		prov = newProvider(cfg, client, pc, logger)
		describeNode(pc.Node, cfg)
		return prov, nil, nil
	},
		nodeutil.WithClient(client),
		func(c *nodeutil.NodeConfig) error {
			// The provider resolves the downward API itself: virtual-kubelet's resolver cannot
			// resolve status.podIP (internal/podutils/env.go at v1.14.1), which Spark's executors use.
			c.SkipDownwardAPIResolution = true
			c.NumWorkers = runtime.NumCPU() * 2
			c.InformerResyncPeriod = time.Minute
			return nil
		},
	)
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	select {
	case err := <-runErr:
		if prov != nil {
			prov.shutdown()
		}
		return err
	case s := <-sig:
		logger.Info("stopping: killing pods, removing their namespaces", "signal", s.String())
		cancel()
		if prov != nil {
			prov.shutdown()
		}
		select {
		case <-runErr:
		case <-time.After(5 * time.Second):
		}
		return nil
	}
}

// describeNode fills the Node the way a kubelet registers itself: addresses, capacity (generous:
// pods are host processes without cgroup limits), node info, pod CIDR, no taints.
func describeNode(n *corev1.Node, cfg config) {
	// NodeRestriction admission refuses labels a kubelet may not set on its own Node, among
	// them virtual-kubelet's default kubernetes.io/role (plugin/pkg/admission/noderestriction).
	delete(n.Labels, "kubernetes.io/role")
	n.Labels["kubernetes.io/os"] = "linux"
	n.Labels["kubernetes.io/arch"] = runtime.GOARCH
	n.Labels["node.kubernetes.io/instance-type"] = "process-kubelet"
	n.Spec.PodCIDR = cfg.podCIDR.String()
	n.Spec.PodCIDRs = []string{cfg.podCIDR.String()}
	hostname, _ := os.Hostname()
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: cfg.nodeIP.String()},
		{Type: corev1.NodeHostName, Address: cfg.nodeName},
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("128Gi"),
		corev1.ResourcePods:             resource.MustParse("250"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	n.Status.Capacity = resources
	n.Status.Allocatable = resources.DeepCopy()
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
		KubeletVersion:          "v1.34.4-process-kubelet",
		ContainerRuntimeVersion: "process://" + hostname,
		KernelVersion:           kernelVersion(),
		OSImage:                 "host processes (spark-exec-svc e2e)",
	}
}

func kernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return string(trimNewline(b))
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
