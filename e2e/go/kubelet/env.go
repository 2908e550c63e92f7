package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// containerSpecFile is what `process-kubelet run-container` reads inside the pod's namespaces.
type containerSpecFile struct {
	Argv       []string    `json:"argv"`
	Env        []string    `json:"env"`
	WorkingDir string      `json:"workingDir"`
	Hostname   string      `json:"hostname"`
	Mounts     []mountSpec `json:"mounts"`
}

type mountSpec struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly"`
}

// containerSpec resolves a container's environment (the kubelet's makeEnvironmentVariables in
// pkg/kubelet/kubelet_pods.go at v1.34.4: service links, envFrom, env with $(VAR) expansion and
// the downward API incl. status.podIP), expands $(VAR) in command/args, and prepares the volume
// mounts (creating mount points on the host, ref-counted).
func (p *provider) containerSpec(r *podRun, c corev1.Container) (*containerSpecFile, error) {
	ctx := context.Background()
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	svcEnv, err := p.serviceEnv(r.pod)
	if err != nil {
		return nil, err
	}
	for _, kv := range svcEnv {
		set(kv[0], kv[1])
	}
	for _, ef := range c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := p.client.CoreV1().ConfigMaps(r.pod.Namespace).Get(ctx, ef.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom configmap %q: %w", ef.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case ef.SecretRef != nil:
			s, err := p.client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, ef.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", ef.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(ef.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, env))
			continue
		}
		v, skip, err := p.envValueFrom(ctx, r, &c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			set(e.Name, v)
		}
	}
	if _, ok := env["PATH"]; !ok {
		set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if _, ok := env["HOSTNAME"]; !ok {
		set("HOSTNAME", podHostname(r.pod))
	}
	if _, ok := env["HOME"]; !ok {
		set("HOME", "/root")
	}
	spec := &containerSpecFile{Hostname: podHostname(r.pod), WorkingDir: c.WorkingDir}
	if spec.WorkingDir == "" {
		// No image, so no image WORKDIR: the pod's own scratch directory.
		spec.WorkingDir = filepath.Join(r.dir, "work")
	}
	for _, k := range order {
		spec.Env = append(spec.Env, k+"="+env[k])
	}
	for _, a := range c.Command {
		spec.Argv = append(spec.Argv, expand(a, env))
	}
	for _, a := range c.Args {
		spec.Argv = append(spec.Argv, expand(a, env))
	}
	for _, vm := range c.VolumeMounts {
		src, err := p.mountSource(r, vm)
		if err != nil {
			return nil, err
		}
		isFile := false
		if st, err := statPath(src); err == nil && !st.IsDir() {
			isFile = true
		}
		created, err := p.mounts.ensure(vm.MountPath, isFile)
		r.mu.Lock()
		r.createdDirs = append(r.createdDirs, created...)
		r.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("mount point %s: %w", vm.MountPath, err)
		}
		spec.Mounts = append(spec.Mounts, mountSpec{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	return spec, nil
}

func (p *provider) mountSource(r *podRun, vm corev1.VolumeMount) (string, error) {
	for _, v := range r.pod.Spec.Volumes {
		if v.Name != vm.Name {
			continue
		}
		base := p.volumeDir(r, v.Name)
		if v.HostPath != nil {
			base = v.HostPath.Path
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = vm.SubPathExpr // $(VAR) in subPathExpr is not expanded here
		}
		if strings.Contains(sub, "..") {
			return "", fmt.Errorf("volumeMount %q: subPath %q", vm.Name, sub)
		}
		if sub != "" {
			return filepath.Join(base, sub), nil
		}
		return base, nil
	}
	return "", fmt.Errorf("volumeMount %q: no volume of that name", vm.Name)
}

func (p *provider) envValueFrom(ctx context.Context, r *podRun, c *corev1.Container, src *corev1.EnvVarSource) (value string, skip bool, err error) {
	switch {
	case src.FieldRef != nil:
		v, err := p.fieldValue(r, src.FieldRef.FieldPath, false)
		return v, false, err
	case src.ResourceFieldRef != nil:
		ref := *src.ResourceFieldRef
		if ref.ContainerName == "" {
			ref.ContainerName = c.Name
		}
		v, err := p.resourceValue(r, &ref)
		return v, false, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := p.client.CoreV1().ConfigMaps(r.pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && ref.Optional != nil && *ref.Optional {
				return "", true, nil
			}
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if ref.Optional != nil && *ref.Optional {
				return "", true, nil
			}
			return "", false, fmt.Errorf("configmap %s has no key %q", ref.Name, ref.Key)
		}
		return v, false, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := p.client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && ref.Optional != nil && *ref.Optional {
				return "", true, nil
			}
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if ref.Optional != nil && *ref.Optional {
				return "", true, nil
			}
			return "", false, fmt.Errorf("secret %s has no key %q", ref.Name, ref.Key)
		}
		return string(v), false, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

var subscript = regexp.MustCompile(`^metadata\.(labels|annotations)\['(.+)'\]$`)

// fieldValue resolves a downward-API field path (pkg/kubelet/kubelet_pods.go podFieldSelectorRuntimeValue
// and pkg/fieldpath at v1.34.4). Whole-map labels/annotations are allowed in volumes only.
func (p *provider) fieldValue(r *podRun, path string, volume bool) (string, error) {
	r.mu.Lock()
	pod := r.pod.DeepCopy()
	ip := r.ip.String()
	r.mu.Unlock()
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return p.cfg.nodeIP.String(), nil
	case "status.podIP", "status.podIPs":
		// Known before the container starts: the provider assigned it (virtual-kubelet cannot
		// resolve it, internal/podutils/env.go at v1.14.1).
		return ip, nil
	case "metadata.labels", "metadata.annotations":
		if !volume {
			return "", fmt.Errorf("fieldRef %s is only supported in downwardAPI volumes", path)
		}
		m := pod.Labels
		if path == "metadata.annotations" {
			m = pod.Annotations
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(m[k]))
		}
		return b.String(), nil
	}
	if m := subscript.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], nil
		}
		return pod.Annotations[m[2]], nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// resourceValue: the container's request/limit divided by the divisor, rounded up; a missing limit
// is the node's allocatable (pkg/api/v1/resource ExtractContainerResourceValue + kubelet defaults).
func (p *provider) resourceValue(r *podRun, ref *corev1.ResourceFieldSelector) (string, error) {
	var c *corev1.Container
	for i := range r.pod.Spec.Containers {
		if r.pod.Spec.Containers[i].Name == ref.ContainerName {
			c = &r.pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	parts := strings.SplitN(ref.Resource, ".", 2)
	if len(parts) != 2 {
		return "", fmt.Errorf("resourceFieldRef %q", ref.Resource)
	}
	name := corev1.ResourceName(parts[1])
	var q resource.Quantity
	var ok bool
	switch parts[0] {
	case "limits":
		q, ok = c.Resources.Limits[name]
		if !ok {
			q, ok = nodeAllocatable[name]
		}
	case "requests":
		q, ok = c.Resources.Requests[name]
		if !ok {
			q, ok = resource.MustParse("0"), true
		}
	}
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %q", ref.Resource)
	}
	if name == corev1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

var nodeAllocatable = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("32"),
	corev1.ResourceMemory:           resource.MustParse("128Gi"),
	corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

// serviceEnv: the docker-links-style variables of the Services in the pod's namespace (when
// enableServiceLinks, the default) and of the `kubernetes` Service in default (always), as
// pkg/kubelet/envvars.FromServices builds them.
func (p *provider) serviceEnv(pod *corev1.Pod) ([][2]string, error) {
	var svcs []*corev1.Service
	if p.services != nil {
		all, err := p.services.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
		for _, s := range all {
			if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
				continue
			}
			if s.Namespace == "default" && s.Name == "kubernetes" {
				svcs = append(svcs, s)
			} else if links && s.Namespace == pod.Namespace {
				svcs = append(svcs, s)
			}
		}
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
	var out [][2]string
	for _, s := range svcs {
		if len(s.Spec.Ports) == 0 {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		ip := s.Spec.ClusterIP
		out = append(out, [2]string{name + "_SERVICE_HOST", ip})
		out = append(out, [2]string{name + "_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port))})
		for _, sp := range s.Spec.Ports {
			if sp.Name != "" {
				out = append(out, [2]string{name + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(sp.Name, "-", "_")), strconv.Itoa(int(sp.Port))})
			}
		}
		first := s.Spec.Ports[0]
		proto := strings.ToLower(string(first.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		out = append(out, [2]string{name + "_PORT", fmt.Sprintf("%s://%s:%d", proto, ip, first.Port)})
		for _, sp := range s.Spec.Ports {
			pr := string(sp.Protocol)
			if pr == "" {
				pr = "TCP"
			}
			prefix := fmt.Sprintf("%s_PORT_%d_%s", name, sp.Port, strings.ToUpper(pr))
			out = append(out,
				[2]string{prefix, fmt.Sprintf("%s://%s:%d", strings.ToLower(pr), ip, sp.Port)},
				[2]string{prefix + "_PROTO", strings.ToLower(pr)},
				[2]string{prefix + "_PORT", strconv.Itoa(int(sp.Port))},
				[2]string{prefix + "_ADDR", ip},
			)
		}
	}
	return out, nil
}

// expand replaces $(VAR) with VAR's value when defined and $$ with $, leaving unknown references
// as written (third_party/forked/golang/expansion in k8s.io/kubernetes).
func expand(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
