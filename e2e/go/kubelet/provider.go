package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type config struct {
	nodeName      string
	nodeIP        net.IP
	podCIDR       *net.IPNet
	netnsPrefix   string
	stateDir      string
	clusterDNS    string
	clusterDomain string
	selfExe       string
}

// provider implements nodeutil.Provider (node.PodLifecycleHandler + node.PodNotifier).
type provider struct {
	cfg      config
	client   kubernetes.Interface
	services corev1listers.ServiceLister
	log      *slog.Logger
	ipam     *ipam
	mounts   *mountPoints

	mu     sync.Mutex
	pods   map[string]*podRun // namespace/name
	notify func(*corev1.Pod)
	closed bool
	// updates carries status notifications to one goroutine, in order: a later status must never
	// be overtaken by an earlier one (virtual-kubelet writes whatever it got last).
	updates chan *corev1.Pod
}

func newProvider(cfg config, client kubernetes.Interface, pc nodeutil.ProviderConfig, logger *slog.Logger) *provider {
	return &provider{
		cfg:      cfg,
		client:   client,
		services: pc.Services,
		log:      logger,
		ipam:     newIPAM(cfg.podCIDR),
		mounts:   newMountPoints(),
		pods:     map[string]*podRun{},
		notify:   func(*corev1.Pod) {},
		updates:  make(chan *corev1.Pod, 4096),
	}
}

func key(namespace, name string) string { return namespace + "/" + name }

// podRun is one pod as this node runs it. Its fields are guarded by mu.
type podRun struct {
	mu         sync.Mutex
	key        string      // namespace/name: fixed for the run (UpdatePod refuses another UID), read without mu
	pod        *corev1.Pod // spec as last received; status is what we report
	netns      string
	hostIf     string
	ip         net.IP
	dir        string // <state>/pods/<uid>
	logDir     string
	record     string // <state>/pods/<ns>_<name>.json
	containers []*containerRun
	// lifecycle
	ctx         context.Context
	cancel      context.CancelFunc
	deleting    bool
	graceEnds   time.Time
	terminated  chan struct{} // closed once every container process has exited for good
	networkDown bool
	setupDone   chan struct{} // closed when setupPod returned (the network exists or never will)
	createdDirs []string      // mount points this pod created on the host (ref-counted in provider.mounts)
}

// procHandle is a started process; state is set before done is closed.
type procHandle struct {
	pid   int
	done  chan struct{}
	state *os.ProcessState
}

type containerRun struct {
	spec         corev1.Container
	proc         *procHandle // nil when no process runs
	state        corev1.ContainerState
	lastState    corev1.ContainerState
	restartCount int32
	ready        bool
	started      bool
	runSpec      *containerSpecFile // what the running process was started with (preStop exec hooks run with it)
	startedAt    metav1.Time        // when the running process was started (its postStart hook may still run)
	// stopping: a stop (killContainer) of the running process is under way; terminate leaves it to it.
	stopping bool
}

// ---- node.PodLifecycleHandler ----

func (p *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	if err := validatePod(pod); err != nil {
		return errdefs.AsInvalidInput(err)
	}
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("process kubelet is shutting down")
	}
	if old, ok := p.pods[k]; ok {
		p.mu.Unlock()
		if old.pod.UID != pod.UID {
			return fmt.Errorf("pod %s: the previous pod of that name (uid %s) is still being removed", k, old.pod.UID)
		}
		return nil
	}
	ip, err := p.ipam.allocate()
	if err != nil {
		p.mu.Unlock()
		return err
	}
	uid := strings.ReplaceAll(string(pod.UID), "-", "")
	r := &podRun{
		key:        k,
		pod:        pod.DeepCopy(),
		netns:      p.cfg.netnsPrefix + uid[:12],
		hostIf:     fmt.Sprintf("vp%d", ipIndex(ip)),
		ip:         ip,
		dir:        filepath.Join(p.cfg.stateDir, "pods", string(pod.UID)),
		record:     filepath.Join(p.cfg.stateDir, "pods", pod.Namespace+"_"+pod.Name+".json"),
		terminated: make(chan struct{}),
		setupDone:  make(chan struct{}),
	}
	r.logDir = filepath.Join(r.dir, "logs")
	if pod.Spec.HostNetwork {
		r.ip = p.cfg.nodeIP
		r.netns = ""
		p.ipam.release(ip)
	}
	for _, c := range pod.Spec.Containers {
		r.containers = append(r.containers, &containerRun{
			spec:  c,
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		})
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	p.pods[k] = r
	p.mu.Unlock()

	now := metav1.Now()
	r.mu.Lock()
	r.pod.Status = corev1.PodStatus{
		Phase:     corev1.PodPending,
		HostIP:    p.cfg.nodeIP.String(),
		HostIPs:   []corev1.HostIP{{IP: p.cfg.nodeIP.String()}},
		StartTime: &now,
		QOSClass:  qosClass(pod),
	}
	p.setConditionsLocked(r)
	p.setContainerStatusesLocked(r)
	p.notifyLocked(r)
	r.mu.Unlock()

	go p.startPod(r)
	return nil
}

func (p *provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r, ok := p.pods[key(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not known to this node", pod.Namespace, pod.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pod.UID != pod.UID {
		return fmt.Errorf("pod %s/%s: uid %s replaced by %s while the old one is being removed", pod.Namespace, pod.Name, r.pod.UID, pod.UID)
	}
	// Labels and annotations may change on a running pod; the processes keep running.
	status := r.pod.Status
	r.pod = pod.DeepCopy()
	r.pod.Status = status
	return nil
}

// DeletePod starts the graceful termination (preStop hooks, SIGTERM, SIGKILL at the end of the
// grace period; see terminate) and returns; the
// terminal status is reported through NotifyPods once the processes are gone. When the pod is no
// longer in the API (virtual-kubelet calls DeletePod again after its force delete) it is forgotten.
func (p *provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	k := key(pod.Namespace, pod.Name)
	p.mu.Lock()
	r, ok := p.pods[k]
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s is not known to this node", k)
	}
	r.mu.Lock()
	if r.pod.UID != pod.UID && pod.UID != "" {
		r.mu.Unlock()
		return errdefs.NotFoundf("pod %s with uid %s is not known to this node", k, pod.UID)
	}
	grace := int64(30)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	first := !r.deleting
	if first {
		r.deleting = true
		r.pod.DeletionTimestamp = pod.DeletionTimestamp
		r.pod.DeletionGracePeriodSeconds = pod.DeletionGracePeriodSeconds
		r.graceEnds = time.Now().Add(time.Duration(grace) * time.Second)
	}
	gone := p.isGoneFromAPI(pod)
	r.mu.Unlock()
	if first {
		p.log.Info("terminating pod", "pod", k, "gracePeriodSeconds", grace)
		go p.terminate(r, time.Duration(grace)*time.Second)
	}
	if gone {
		// Wait for the processes (bounded by the grace period) and forget the pod.
		go func() {
			<-r.terminated
			p.teardown(r)
			p.mu.Lock()
			if p.pods[k] == r {
				delete(p.pods, k)
			}
			p.mu.Unlock()
		}()
	}
	return nil
}

// isGoneFromAPI: virtual-kubelet hands DeletePod the provider's own copy (from GetPod) when the
// pod is no longer in its informer; the informer's copy otherwise.
func (p *provider) isGoneFromAPI(pod *corev1.Pod) bool {
	_, err := p.client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err == nil {
		return false
	}
	var status interface{ Status() metav1.Status }
	if errors.As(err, &status) && status.Status().Code == 404 {
		return true
	}
	return false
}

func (p *provider) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	r, ok := p.pods[key(namespace, name)]
	p.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not known to this node", namespace, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pod.DeepCopy(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(runs))
	for _, r := range runs {
		r.mu.Lock()
		out = append(out, r.pod.DeepCopy())
		r.mu.Unlock()
	}
	return out, nil
}

// NotifyPods implements node.PodNotifier.
func (p *provider) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
	go func() {
		for pod := range p.updates {
			p.mu.Lock()
			f := p.notify
			p.mu.Unlock()
			f(pod) // may block; never under our locks
		}
	}()
}

func (p *provider) notifyLocked(r *podRun) {
	p.updates <- r.pod.DeepCopy()
}

// ---- the rest of nodeutil.Provider: no kubelet HTTP API (logs are files under --state-dir) ----

var errNoKubeletAPI = errors.New("the process kubelet has no kubelet API; container logs are in its --state-dir")

func (p *provider) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, errNoKubeletAPI
}
func (p *provider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errNoKubeletAPI
}
func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errNoKubeletAPI
}
func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errNoKubeletAPI
}
func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errNoKubeletAPI
}
func (p *provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errNoKubeletAPI
}

// ---- pod lifecycle ----

// validatePod refuses what a process kubelet cannot run, with the reason in the pod's status.
func validatePod(pod *corev1.Pod) error {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if len(c.Command) == 0 {
			return fmt.Errorf("container %q has no command: a process kubelet has no images, so no image ENTRYPOINT to run the args with", c.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if !volumeSupported(v) {
			return fmt.Errorf("volume %q: only emptyDir, configMap, secret, downwardAPI, projected and hostPath volumes are supported by the process kubelet", v.Name)
		}
	}
	return nil
}

func (p *provider) startPod(r *podRun) {
	k := r.key
	err := p.setupPod(r)
	close(r.setupDone)
	if err != nil {
		p.log.Error("pod setup failed", "pod", k, "err", err)
		p.failPod(r, "ProviderFailed", err.Error())
		return
	}
	// Init containers: one after the other, each to a successful exit.
	for _, ic := range r.pod.Spec.InitContainers {
		code, err := p.runToCompletion(r, ic)
		if err != nil || code != 0 {
			msg := fmt.Sprintf("init container %q exited with %d", ic.Name, code)
			if err != nil {
				msg = fmt.Sprintf("init container %q: %v", ic.Name, err)
			}
			p.failPod(r, "InitContainerFailed", msg)
			return
		}
	}
	// Specs first: resolving env and mount points takes r.mu itself.
	specs := make([]*containerSpecFile, len(r.containers))
	for i, c := range r.containers {
		spec, err := p.containerSpec(r, c.spec)
		if err != nil {
			p.failPod(r, "CreateContainerConfigError", err.Error())
			return
		}
		specs[i] = spec
	}
	// One after the other, in spec order, each container's postStart hook run to its end before the
	// next container starts: the kubelet's SyncPod starts ContainersToStart in a loop
	// (kuberuntime_manager.go:1490 at v1.34.4) and startContainer runs the hook synchronously
	// (kuberuntime_container.go:318-334) — what sidecars that must be up first rely on (Istio's
	// holdApplicationUntilProxyStarts).
	for i, c := range r.containers {
		r.mu.Lock()
		if r.deleting {
			r.mu.Unlock()
			p.finishIfAllExited(r)
			return
		}
		if err := p.startContainerLocked(r, c, specs[i]); err != nil {
			msg := err.Error()
			r.mu.Unlock()
			p.log.Error("container start failed", "pod", k, "container", c.spec.Name, "err", msg)
			p.failPod(r, "ContainerStartFailed", msg)
			return
		}
		proc := c.proc
		r.mu.Unlock()
		// A failed hook: the container is killed and the loop goes on to the next container (SyncPod
		// ignores startContainer's error, kuberuntime_manager.go:1490).
		p.runPostStartOf(r, c, proc)
	}
	// The status as the kubelet writes it once SyncPod has started every container.
	r.mu.Lock()
	deleting := r.deleting
	p.setConditionsLocked(r)
	p.setContainerStatusesLocked(r)
	p.notifyLocked(r)
	r.mu.Unlock()
	if deleting {
		p.finishIfAllExited(r)
		return
	}
	p.log.Info("pod running", "pod", k, "podIP", r.ip.String(), "netns", r.netns)
}

// podGraceLocked is the grace period a kill uses (r.mu held): the deletion's when the pod is being
// deleted, else terminationGracePeriodSeconds (30 s when unset, as the API defaults it), as the
// kubelet's setTerminationGracePeriod.
func podGraceLocked(r *podRun) time.Duration {
	if g := r.pod.DeletionGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	if g := r.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

func (p *provider) setupPod(r *podRun) error {
	for _, d := range []string{r.dir, r.logDir, filepath.Join(r.dir, "volumes"), filepath.Join(r.dir, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if r.netns != "" {
		if err := setupPodNetwork(r.netns, r.hostIf, r.ip, p.cfg.nodeIP); err != nil {
			return fmt.Errorf("pod network: %w", err)
		}
		if err := p.writeNetnsEtc(r); err != nil {
			return err
		}
	}
	if err := p.materializeVolumes(r); err != nil {
		return err
	}
	r.mu.Lock()
	r.pod.Status.PodIP = r.ip.String()
	r.pod.Status.PodIPs = []corev1.PodIP{{IP: r.ip.String()}}
	p.setConditionsLocked(r)
	p.notifyLocked(r)
	r.mu.Unlock()
	rec, _ := json.Marshal(map[string]string{
		"namespace": r.pod.Namespace, "name": r.pod.Name, "uid": string(r.pod.UID),
		"netns": r.netns, "podIP": r.ip.String(), "logDir": r.logDir,
	})
	tmp := r.record + ".tmp"
	if err := os.WriteFile(tmp, rec, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.record)
}

// writeNetnsEtc writes /etc/netns/<netns>/{resolv.conf,hosts}, which `ip netns exec` bind-mounts
// over /etc in the container's private mount namespace (ip-netns(8)).
func (p *provider) writeNetnsEtc(r *podRun) error {
	dir := filepath.Join("/etc/netns", r.netns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	resolv := dnsConfig(r.pod, p.cfg.clusterDNS, p.cfg.clusterDomain)
	if resolv != "" {
		if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(resolv), 0o644); err != nil {
			return err
		}
	}
	hostname := podHostname(r.pod)
	fqdn := hostname
	if r.pod.Spec.Subdomain != "" {
		fqdn = fmt.Sprintf("%s.%s.%s.svc.%s\t%s", hostname, r.pod.Spec.Subdomain, r.pod.Namespace, p.cfg.clusterDomain, hostname)
	}
	hosts := fmt.Sprintf("# Kubernetes-managed hosts file (process kubelet).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", r.ip, fqdn)
	for _, ha := range r.pod.Spec.HostAliases {
		hosts += fmt.Sprintf("%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
	}
	return os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644)
}

func podHostname(pod *corev1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// dnsConfig renders resolv.conf as the kubelet does for dnsPolicy ClusterFirst (the default),
// None and Default (pkg/kubelet/network/dns/dns.go at v1.34.4): "" = keep the node's file.
func dnsConfig(pod *corev1.Pod, clusterDNS, domain string) string {
	var servers, searches, options []string
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if pod.Spec.HostNetwork && policy == corev1.DNSClusterFirst {
		policy = corev1.DNSDefault
	}
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		if clusterDNS == "" {
			return ""
		}
		servers = []string{clusterDNS}
		searches = []string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}
		options = []string{"ndots:5"}
	case corev1.DNSDefault:
		if pod.Spec.DNSConfig == nil {
			return ""
		}
	case corev1.DNSNone:
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		servers = append(servers, dc.Nameservers...)
		searches = append(searches, dc.Searches...)
		for _, o := range dc.Options {
			if o.Value != nil {
				options = append(options, o.Name+":"+*o.Value)
			} else {
				options = append(options, o.Name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("# Kubernetes-managed resolv.conf (process kubelet).\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(searches, " "))
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.String()
}

// startContainerLocked starts one container's process (r.mu held).
func (p *provider) startContainerLocked(r *podRun, c *containerRun, spec *containerSpecFile) error {
	proc, err := p.spawn(r, c.spec.Name, spec)
	if err != nil {
		return err
	}
	c.proc = proc
	c.runSpec = spec
	c.startedAt = metav1.Now()
	c.stopping = false
	if hasPostStart(c) {
		// Until its postStart hook has ended the container is not started (runPostStartOf).
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		c.started, c.ready = false, false
	} else {
		c.markRunning()
	}
	go p.watchContainer(r, c, proc)
	return nil
}

// markRunning: the container runs and counts as started and ready (no probes are run: a started
// container is ready, as a kubelet reports a container without a readinessProbe).
func (c *containerRun) markRunning() {
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: c.startedAt}}
	c.started, c.ready = true, true
}

func hasPostStart(c *containerRun) bool {
	return c.spec.Lifecycle != nil && c.spec.Lifecycle.PostStart != nil
}

// runPostStartOf runs the postStart hook of c's process proc, if it has one (r.mu not held). While
// it runs the container shows Waiting (ContainerCreating): the kubelet writes no status while its
// SyncPod is blocked in startContainer's hook. A failed hook gets the container killed, as
// startContainer does (killContainer: preStop, SIGTERM, SIGKILL within the grace period); its exit
// then follows the restart policy (watchContainer).
func (p *provider) runPostStartOf(r *podRun, c *containerRun, proc *procHandle) {
	if !hasPostStart(c) {
		return
	}
	err := p.runPostStart(r, c, proc)
	r.mu.Lock()
	k := r.key
	exited := c.proc != proc
	select {
	case <-proc.done:
		exited = true // watchContainer may not have taken r.mu yet: never report it Running
	default:
	}
	if exited {
		r.mu.Unlock() // watchContainer reports its end
		return
	}
	if err == nil {
		c.markRunning()
		r.mu.Unlock()
		return
	}
	if c.stopping {
		r.mu.Unlock() // the pod's deletion stops it already
		return
	}
	c.stopping = true
	grace := podGraceLocked(r)
	r.mu.Unlock()
	p.log.Warn("postStart hook failed: container killed", "pod", k, "container", c.spec.Name, "err", err)
	p.stopContainer(r, c, proc, grace)
}

// spawn starts `ip netns exec <netns> process-kubelet run-container <spec>` (or without the netns
// for hostNetwork pods); the helper sets up mounts and hostname and execs the container's command.
func (p *provider) spawn(r *podRun, name string, spec *containerSpecFile) (*procHandle, error) {
	specFile := filepath.Join(r.dir, "container-"+name+".json")
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(r.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	var cmd *exec.Cmd
	if r.netns != "" {
		cmd = exec.Command("ip", "netns", "exec", r.netns, p.cfg.selfExe, "run-container", specFile)
	} else {
		cmd = exec.Command(p.cfg.selfExe, "run-container", specFile)
	}
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group (SIGTERM/SIGKILL reach the container's children too); killed if the
	// kubelet dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &procHandle{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		h.state = cmd.ProcessState
		close(h.done)
	}()
	return h, nil
}

func exitCodeOf(ps *os.ProcessState) (int32, string) {
	if ps == nil {
		return 137, "Error"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int32(128 + int(ws.Signal())), "Error"
	}
	code := int32(ps.ExitCode())
	if code == 0 {
		return 0, "Completed"
	}
	return code, "Error"
}

func (p *provider) watchContainer(r *podRun, c *containerRun, proc *procHandle) {
	<-proc.done
	r.mu.Lock()
	code, reason := exitCodeOf(proc.state)
	startedAt := c.startedAt
	c.stopping = false
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, StartedAt: startedAt, FinishedAt: metav1.Now(),
	}}
	c.ready = false
	c.proc = nil
	restart := !r.deleting && shouldRestart(r.pod.Spec.RestartPolicy, code)
	var delay time.Duration
	if restart {
		c.lastState = c.state
		c.restartCount++
		delay = backoff(c.restartCount)
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.spec.Name, r.pod.Name)}}
	}
	p.setConditionsLocked(r)
	p.setContainerStatusesLocked(r)
	p.notifyLocked(r)
	r.mu.Unlock()
	p.log.Info("container exited", "pod", r.key, "container", c.spec.Name, "exitCode", code, "restart", restart)
	if restart {
		select {
		case <-time.After(delay):
		case <-r.ctx.Done():
		}
		spec, specErr := p.containerSpec(r, c.spec)
		r.mu.Lock()
		if !r.deleting {
			err := specErr
			if err == nil {
				err = p.startContainerLocked(r, c, spec)
			}
			if err != nil {
				c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}}
			}
			proc := c.proc
			p.setConditionsLocked(r)
			p.setContainerStatusesLocked(r)
			p.notifyLocked(r)
			r.mu.Unlock()
			if err == nil {
				// startContainer runs the hook on every start, restarts too.
				p.runPostStartOf(r, c, proc)
				r.mu.Lock()
				p.setConditionsLocked(r)
				p.setContainerStatusesLocked(r)
				p.notifyLocked(r)
				r.mu.Unlock()
			}
			return
		}
		r.mu.Unlock()
	}
	p.finishIfAllExited(r)
}

func shouldRestart(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

// backoff as the kubelet's CrashLoopBackOff: 10 s doubling, at most 5 min.
func backoff(restarts int32) time.Duration {
	d := 10 * time.Second
	for i := int32(1); i < restarts && d < 5*time.Minute; i++ {
		d *= 2
	}
	if d > 5*time.Minute {
		d = 5 * time.Minute
	}
	return d
}

// finishIfAllExited: once no container runs (and none will be restarted) the pod is terminal:
// phase Succeeded if every container exited 0, else Failed (as the kubelet since v1.27 also for
// deleted pods), Ready false; then its sandbox (network namespace) is removed.
func (p *provider) finishIfAllExited(r *podRun) {
	r.mu.Lock()
	for _, c := range r.containers {
		// A process still runs, or (not winding down) a container will still be started or restarted.
		if c.proc != nil || (!r.deleting && c.state.Terminated == nil) {
			r.mu.Unlock()
			return
		}
	}
	select {
	case <-r.terminated:
		r.mu.Unlock()
		return
	default:
	}
	allZero := true
	for _, c := range r.containers {
		if c.state.Terminated == nil {
			// Never started (deleted while creating): terminated without a process.
			c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
				Message: "The container could not be located when the pod was deleted.", FinishedAt: metav1.Now()}}
		}
		if c.state.Terminated.ExitCode != 0 {
			allZero = false
		}
	}
	if allZero {
		r.pod.Status.Phase = corev1.PodSucceeded
	} else {
		r.pod.Status.Phase = corev1.PodFailed
	}
	close(r.terminated)
	r.cancel()
	p.setConditionsLocked(r)
	p.setContainerStatusesLocked(r)
	p.notifyLocked(r)
	r.mu.Unlock()
	p.log.Info("pod terminal", "pod", r.key, "phase", r.pod.Status.Phase)
	p.teardownNetwork(r)
	if r.pod.DeletionTimestamp != nil {
		go p.finalizeDeletion(r.pod.Namespace, r.pod.Name, r.pod.UID, r.pod.Status.Phase)
	}
}

// finalizeDeletion: once the terminal status is in the API, delete the pod with grace 0 and a UID
// precondition, as the kubelet's status manager does when a terminating pod's containers have
// stopped (pkg/kubelet/status/status_manager.go canBeDeleted/syncPod at v1.34.4). virtual-kubelet
// alone would wait for the whole grace period (its informer does not requeue on status changes).
func (p *provider) finalizeDeletion(namespace, name string, uid types.UID, phase corev1.PodPhase) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The terminal status normally reaches the API within milliseconds (virtual-kubelet's status
	// queue); should it not within 2 s, delete anyway: the processes are gone either way.
	statusDeadline := time.Now().Add(2 * time.Second)
	for ctx.Err() == nil {
		pod, err := p.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.UID != uid {
			return // gone (or replaced)
		}
		if pod.Status.Phase == phase || time.Now().After(statusDeadline) {
			zero := int64(0)
			err := p.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
			if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failPod: the pod cannot run (setup or start failed): Failed with the reason, nothing left running.
func (p *provider) failPod(r *podRun, reason, message string) {
	r.mu.Lock()
	r.deleting = true // winding down: nothing is restarted
	for _, c := range r.containers {
		if c.proc != nil {
			_ = syscall.Kill(-c.proc.pid, syscall.SIGKILL)
		}
	}
	r.pod.Status.Reason = reason
	r.pod.Status.Message = message
	for _, c := range r.containers {
		if c.state.Terminated == nil && c.proc == nil {
			c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: message, FinishedAt: metav1.Now()}}
		}
	}
	r.mu.Unlock()
	p.finishIfAllExited(r)
}

// terminate stops every container of the pod in parallel, each as the kubelet's killContainer does
// (pkg/kubelet/kuberuntime/kuberuntime_container.go at v1.34: killContainersWithSyncResult starts
// one goroutine per container; see stopContainer for one container's steps).
func (p *provider) terminate(r *podRun, grace time.Duration) {
	r.mu.Lock()
	type running struct {
		c    *containerRun
		proc *procHandle
	}
	var stops []running
	for _, c := range r.containers {
		if c.proc != nil {
			if !c.stopping { // else a failed postStart hook's kill is under way: its exit ends it
				c.stopping = true
				stops = append(stops, running{c, c.proc})
			}
		} else if c.state.Waiting != nil && c.lastState.Terminated != nil {
			// Backing off: nothing to stop; it ended as it last exited.
			c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: c.lastState.Terminated.ExitCode,
				Reason: c.lastState.Terminated.Reason, FinishedAt: metav1.Now()}}
		}
		// Never started: left Waiting; finishIfAllExited reports it as the kubelet does (137,
		// ContainerStatusUnknown).
	}
	r.cancel()
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range stops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stopContainer(r, s.c, s.proc, grace)
		}()
	}
	wg.Wait()
	p.finishIfAllExited(r)
}

// minimumStopWindow is the kubelet's minimumGracePeriodInSeconds (pkg/kubelet/kuberuntime/
// kuberuntime_manager.go at v1.34): the least time between SIGTERM and SIGKILL.
const minimumStopWindow = 2 * time.Second

// stopWindow is what killContainer (kuberuntime_container.go at v1.34) leaves between SIGTERM and
// SIGKILL: the grace period less the preStop hook's run time in whole seconds (executePreStopHook
// returns int64(elapsed.Seconds()), truncated), never less than minimumStopWindow.
func stopWindow(grace, hookTook time.Duration) time.Duration {
	w := (grace/time.Second - hookTook/time.Second) * time.Second
	if w < minimumStopWindow {
		w = minimumStopWindow
	}
	return w
}

// stopContainer is killContainer for one container: the preStop hook when there is one and the
// grace period is > 0 (bounded by the grace period: executePreStopHook stops waiting for it then),
// then SIGTERM to the container's process group and SIGKILL once stopWindow has passed.
func (p *provider) stopContainer(r *podRun, c *containerRun, proc *procHandle, grace time.Duration) {
	var hookTook time.Duration
	var hook *procHandle
	if c.spec.Lifecycle != nil && c.spec.Lifecycle.PreStop != nil && grace >= time.Second {
		hookTook, hook = p.runPreStop(r, c, proc, grace)
	}
	window := stopWindow(grace, hookTook)
	select {
	case <-proc.done:
	default:
		_ = syscall.Kill(-proc.pid, syscall.SIGTERM)
		select {
		case <-proc.done:
		case <-time.After(window):
			_ = syscall.Kill(-proc.pid, syscall.SIGKILL)
			<-proc.done
		}
	}
	// A hook still running when its container is gone dies with it (in a runtime it runs inside the
	// container's PID namespace and cgroup).
	if hook != nil {
		select {
		case <-hook.done:
		default:
			_ = syscall.Kill(-hook.pid, syscall.SIGKILL)
			<-hook.done
		}
	}
}

// hookNote appends a line to <logDir>/<name>.log, where the hook's own output goes too (a real
// kubelet keeps an exec hook's output only in the Failed…Hook event's message).
func hookNote(r *podRun, name string) func(format string, a ...any) {
	return func(format string, a ...any) {
		f, err := os.OpenFile(filepath.Join(r.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "process-kubelet %s "+format+"\n", append([]any{time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}, a...)...)
	}
}

// spawnExecHook starts an exec hook as a runtime's exec runs it: the hook's command (not
// $(VAR)-expanded) with the container's environment, mounts, hostname and network namespace
// (spawn with the running container's spec, argv replaced); its output goes to <logDir>/<name>.log.
func (p *provider) spawnExecHook(r *podRun, c *containerRun, name string, argv []string) (*procHandle, error) {
	r.mu.Lock()
	base := c.runSpec
	r.mu.Unlock()
	if base == nil {
		return nil, errors.New("the container has no running spec")
	}
	spec := *base
	spec.Argv = append([]string(nil), argv...)
	h, err := p.spawn(r, name, &spec)
	if err == nil {
		// What the hook leaves behind in its process group goes with it: in a runtime it would live
		// on until the container's PID namespace ends; here it would outlive the pod. Killed right
		// after the hook is reaped, while its group id cannot have been reused (a non-empty group
		// keeps it; an empty one answers ESRCH).
		go func() {
			<-h.done
			_ = syscall.Kill(-h.pid, syscall.SIGKILL)
		}()
	}
	return h, err
}

// runPreStop runs the container's preStop hook and waits for it at most the grace period, as
// executePreStopHook does (pkg/kubelet/kuberuntime/kuberuntime_container.go at v1.34); it returns
// how long it waited and, for an exec hook, its process (nil once done; killed when the container's
// process exits first, as its PID namespace would take it). A sleep hook sleeps; httpGet and
// tcpSocket hooks are not supported here: logged and skipped. The hook's start, exit code and
// duration go to <logDir>/<container>.prestop.log, with its output.
func (p *provider) runPreStop(r *podRun, c *containerRun, proc *procHandle, grace time.Duration) (time.Duration, *procHandle) {
	k := r.key
	name := c.spec.Name + ".prestop"
	note := hookNote(r, name)
	h := c.spec.Lifecycle.PreStop
	start := time.Now()
	switch {
	case h.Exec != nil:
		if len(h.Exec.Command) == 0 {
			note("preStop exec: no command; skipped")
			return 0, nil
		}
		note("preStop exec %q started (grace period %s)", h.Exec.Command, grace)
		p.log.Info("preStop hook started", "pod", k, "container", c.spec.Name, "command", h.Exec.Command, "gracePeriod", grace)
		hook, err := p.spawnExecHook(r, c, name, h.Exec.Command)
		if err != nil {
			note("preStop exec failed to start: %v", err)
			p.log.Warn("preStop hook failed to start", "pod", k, "container", c.spec.Name, "err", err)
			return time.Since(start), nil
		}
		go func() {
			<-hook.done
			code, _ := exitCodeOf(hook.state)
			took := time.Since(start)
			note("preStop exec exited with code %d after %d ms", code, took.Milliseconds())
			p.log.Info("preStop hook exited", "pod", k, "container", c.spec.Name, "exitCode", code, "took", took)
		}()
		select {
		case <-hook.done:
			return time.Since(start), nil
		case <-proc.done:
			// The container's process ended while its hook ran (e.g. decom.sh waiting for the JVM it
			// signalled). In a runtime the hook runs in the container's PID namespace, and the end of
			// that namespace's init kills every process in it (pid_namespaces(7)): so here.
			note("preStop exec killed: the container's process exited %d ms after the hook started", time.Since(start).Milliseconds())
			_ = syscall.Kill(-hook.pid, syscall.SIGKILL)
			<-hook.done
			return time.Since(start), nil
		case <-time.After(grace):
			note("preStop exec not completed in the grace period (%s)", grace)
			p.log.Info("preStop hook not completed in grace period", "pod", k, "container", c.spec.Name, "gracePeriod", grace)
			return time.Since(start), hook
		}
	case h.Sleep != nil:
		d := time.Duration(h.Sleep.Seconds) * time.Second
		note("preStop sleep %s started (grace period %s)", d, grace)
		if d > grace {
			d = grace
		}
		time.Sleep(d)
		note("preStop sleep done after %d ms", time.Since(start).Milliseconds())
		return time.Since(start), nil
	default:
		note("preStop hook of a kind the process kubelet does not run (httpGet, tcpSocket): skipped")
		p.log.Warn("preStop hook not supported by the process kubelet (only exec and sleep): skipped", "pod", k, "container", c.spec.Name)
		return 0, nil
	}
}

// runPostStart runs the container's postStart hook to its end, as startContainer does
// (kuberuntime_container.go:318-334 at v1.34.4: the handler runs synchronously, an exec handler
// with no timeout of its own); an error means the hook failed (exit code ≠ 0, or it could not
// start) and the caller kills the container. It stops waiting, killing the hook, when the
// container's process exits (the hook dies with its PID namespace) or the pod is deleted. Exec and
// sleep hooks; httpGet and tcpSocket are logged and skipped. Start, exit code and duration go to
// <logDir>/<container>.poststart.log, with the hook's output.
func (p *provider) runPostStart(r *podRun, c *containerRun, proc *procHandle) error {
	k := r.key
	name := c.spec.Name + ".poststart"
	note := hookNote(r, name)
	h := c.spec.Lifecycle.PostStart
	start := time.Now()
	switch {
	case h.Exec != nil:
		if len(h.Exec.Command) == 0 {
			note("postStart exec: no command; skipped")
			return nil
		}
		note("postStart exec %q started", h.Exec.Command)
		hook, err := p.spawnExecHook(r, c, name, h.Exec.Command)
		if err != nil {
			note("postStart exec failed to start: %v", err)
			return fmt.Errorf("postStart exec failed to start: %w", err)
		}
		select {
		case <-hook.done:
			code, _ := exitCodeOf(hook.state)
			note("postStart exec exited with code %d after %d ms", code, time.Since(start).Milliseconds())
			p.log.Info("postStart hook exited", "pod", k, "container", c.spec.Name, "exitCode", code, "took", time.Since(start))
			if code != 0 {
				return fmt.Errorf("postStart exec exited with code %d", code)
			}
			return nil
		case <-proc.done:
			note("postStart exec killed: the container's process exited %d ms after the hook started", time.Since(start).Milliseconds())
		case <-r.ctx.Done():
			note("postStart exec killed: the pod is being deleted, %d ms after the hook started", time.Since(start).Milliseconds())
		}
		_ = syscall.Kill(-hook.pid, syscall.SIGKILL)
		<-hook.done
		return nil
	case h.Sleep != nil:
		d := time.Duration(h.Sleep.Seconds) * time.Second
		note("postStart sleep %s started", d)
		select {
		case <-time.After(d):
		case <-proc.done:
		case <-r.ctx.Done():
		}
		note("postStart sleep done after %d ms", time.Since(start).Milliseconds())
		return nil
	default:
		note("postStart hook of a kind the process kubelet does not run (httpGet, tcpSocket): skipped")
		p.log.Warn("postStart hook not supported by the process kubelet (only exec and sleep): skipped", "pod", k, "container", c.spec.Name)
		return nil
	}
}

// runToCompletion runs an init container and waits for it.
func (p *provider) runToCompletion(r *podRun, c corev1.Container) (int32, error) {
	spec, err := p.containerSpec(r, c)
	if err != nil {
		return -1, err
	}
	proc, err := p.spawn(r, c.Name, spec)
	if err != nil {
		return -1, err
	}
	select {
	case <-proc.done:
	case <-r.ctx.Done():
		_ = syscall.Kill(-proc.pid, syscall.SIGKILL)
		<-proc.done
	}
	code, _ := exitCodeOf(proc.state)
	return code, nil
}

// setConditionsLocked derives the pod conditions from the container states, as the kubelet's
// status manager does (pkg/kubelet/status/generate.go at v1.34.4).
func (p *provider) setConditionsLocked(r *podRun) {
	now := metav1.Now()
	allReady := len(r.containers) > 0
	for _, c := range r.containers {
		if !c.ready {
			allReady = false
		}
	}
	sandbox := r.pod.Status.PodIP != "" && r.pod.Status.Phase != corev1.PodSucceeded && r.pod.Status.Phase != corev1.PodFailed
	initialized := true
	for _, c := range r.containers {
		if !c.started && c.state.Terminated == nil {
			initialized = len(r.pod.Spec.InitContainers) == 0 && sandbox
		}
	}
	// Running once a container runs and none is still waiting for its first start (kubelet's
	// getPhase, kubelet_pods.go:1642 at v1.34.4: `waiting > 0` → Pending): a sidecar whose
	// postStart hook holds the next container back leaves the pod Pending.
	// A container that has exited (or backs off after an exit) counts as stopped: under
	// restartPolicy Always the pod is Running with none running (getPhase's last cases).
	anyRunning, anyWaiting, anyStopped := false, false, false
	for _, c := range r.containers {
		switch {
		case c.state.Running != nil:
			anyRunning = true
		case c.state.Waiting != nil && c.lastState.Terminated == nil:
			anyWaiting = true
		default:
			anyStopped = true
		}
	}
	always := r.pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || r.pod.Spec.RestartPolicy == ""
	if r.pod.Status.Phase == corev1.PodPending && !anyWaiting && (anyRunning || (anyStopped && always)) {
		r.pod.Status.Phase = corev1.PodRunning
	}
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
			reason = ""
		}
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now}
	}
	notReadyReason := "ContainersNotReady"
	if r.pod.Status.Phase == corev1.PodSucceeded || r.pod.Status.Phase == corev1.PodFailed {
		notReadyReason = "PodCompleted"
	}
	next := []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, sandbox, ""),
		cond(corev1.PodInitialized, initialized, "PodInitializing"),
		cond(corev1.PodReady, allReady, notReadyReason),
		cond(corev1.ContainersReady, allReady, notReadyReason),
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	// Keep the transition time of conditions whose status did not change.
	for i := range next {
		for _, old := range r.pod.Status.Conditions {
			if old.Type == next[i].Type && old.Status == next[i].Status {
				next[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	r.pod.Status.Conditions = next
}

func (p *provider) setContainerStatusesLocked(r *podRun) {
	statuses := make([]corev1.ContainerStatus, 0, len(r.containers))
	for _, c := range r.containers {
		started := c.state.Running != nil
		cs := corev1.ContainerStatus{
			Name:                 c.spec.Name,
			State:                c.state,
			LastTerminationState: c.lastState,
			Ready:                c.ready,
			RestartCount:         c.restartCount,
			Image:                c.spec.Image,
			ImageID:              "",
			Started:              &started,
		}
		if c.started {
			cs.ContainerID = fmt.Sprintf("process://%s/%s", r.pod.UID, c.spec.Name)
		}
		statuses = append(statuses, cs)
	}
	r.pod.Status.ContainerStatuses = statuses
}

func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	anyRequest, allGuaranteed := false, true
	for _, c := range pod.Spec.Containers {
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[res]
			lim, hasLim := c.Resources.Limits[res]
			if hasReq || hasLim {
				anyRequest = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				allGuaranteed = false
			}
		}
	}
	switch {
	case !anyRequest:
		return corev1.PodQOSBestEffort
	case allGuaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}

// teardownNetwork removes the pod's network namespace, veth, route and /etc/netns dir, and
// releases its IP (the kubelet's StopPodSandbox).
func (p *provider) teardownNetwork(r *podRun) {
	<-r.setupDone
	r.mu.Lock()
	if r.networkDown {
		r.mu.Unlock()
		return
	}
	r.networkDown = true
	netns, hostIf, ip := r.netns, r.hostIf, r.ip
	r.mu.Unlock()
	if netns != "" {
		if err := teardownPodNetwork(netns, hostIf, ip); err != nil {
			p.log.Warn("pod network teardown", "netns", netns, "err", err)
		}
		_ = os.RemoveAll(filepath.Join("/etc/netns", netns))
		p.ipam.release(ip)
	}
	_ = os.Remove(r.record)
}

// teardown removes everything of the pod but its logs.
func (p *provider) teardown(r *podRun) {
	p.teardownNetwork(r)
	r.mu.Lock()
	dirs := r.createdDirs
	r.createdDirs = nil
	r.mu.Unlock()
	p.mounts.release(dirs)
	_ = os.RemoveAll(filepath.Join(r.dir, "volumes"))
	_ = os.RemoveAll(filepath.Join(r.dir, "work"))
}

// shutdown (the kubelet is stopping): every pod's processes are killed (SIGTERM, 2 s, SIGKILL) and
// everything it made on the host is removed; the API is not told (the node goes away).
func (p *provider) shutdown() {
	p.mu.Lock()
	p.closed = true
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.notify = func(*corev1.Pod) {}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func(r *podRun) {
			defer wg.Done()
			r.mu.Lock()
			first := !r.deleting
			r.deleting = true
			r.mu.Unlock()
			if first {
				p.terminate(r, 2*time.Second)
			}
			select {
			case <-r.terminated:
			case <-time.After(5 * time.Second):
			}
			p.teardown(r)
		}(r)
	}
	wg.Wait()
}
