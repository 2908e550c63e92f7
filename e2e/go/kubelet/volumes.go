package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volumes are materialized as directories under <state>/pods/<uid>/volumes/<name> and
// bind-mounted onto their mountPath inside the container's private mount namespace (see
// container.go). They are written once, at pod start: ConfigMap/Secret/token updates are not
// propagated into running pods (the kubelet refreshes them periodically).

func volumeSupported(v corev1.Volume) bool {
	s := v.VolumeSource
	return s.EmptyDir != nil || s.ConfigMap != nil || s.Secret != nil || s.DownwardAPI != nil || s.Projected != nil || s.HostPath != nil
}

func (p *provider) volumeDir(r *podRun, name string) string {
	return filepath.Join(r.dir, "volumes", name)
}

func (p *provider) materializeVolumes(r *podRun) error {
	ctx := context.Background()
	for _, v := range r.pod.Spec.Volumes {
		if v.HostPath != nil {
			if v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectoryOrCreate {
				if err := os.MkdirAll(v.HostPath.Path, 0o755); err != nil {
					return err
				}
			}
			continue
		}
		dir := p.volumeDir(r, v.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		var files map[string]fileContent
		var err error
		switch {
		case v.EmptyDir != nil:
			_ = os.Chmod(dir, 0o777)
			continue
		case v.ConfigMap != nil:
			files, err = p.configMapFiles(ctx, r.pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
		case v.Secret != nil:
			files, err = p.secretFiles(ctx, r.pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
		case v.DownwardAPI != nil:
			files, err = p.downwardAPIFiles(r, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		case v.Projected != nil:
			files, err = p.projectedFiles(ctx, r, v.Projected)
		}
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if err := writeFiles(dir, files); err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

type fileContent struct {
	data []byte
	mode os.FileMode
}

func modeOr(m *int32, def int32) os.FileMode {
	if m != nil {
		return os.FileMode(*m)
	}
	return os.FileMode(def)
}

func keyFiles(data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, what string) (map[string]fileContent, error) {
	out := map[string]fileContent{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = fileContent{v, modeOr(defaultMode, 0o644)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		mode := modeOr(defaultMode, 0o644)
		if it.Mode != nil {
			mode = os.FileMode(*it.Mode)
		}
		out[it.Path] = fileContent{v, mode}
	}
	return out, nil
}

func (p *provider) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool, mode *int32) (map[string]fileContent, error) {
	cm, err := p.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return map[string]fileContent{}, nil
		}
		return nil, fmt.Errorf("configmap %s/%s: %w", ns, name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(data, items, mode, "configmap "+name)
}

func (p *provider) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool, mode *int32) (map[string]fileContent, error) {
	s, err := p.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return map[string]fileContent{}, nil
		}
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return keyFiles(s.Data, items, mode, "secret "+name)
}

func (p *provider) downwardAPIFiles(r *podRun, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) (map[string]fileContent, error) {
	out := map[string]fileContent{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = p.fieldValue(r, it.FieldRef.FieldPath, true)
		case it.ResourceFieldRef != nil:
			val, err = p.resourceValue(r, it.ResourceFieldRef)
		}
		if err != nil {
			return nil, err
		}
		mode := modeOr(defaultMode, 0o644)
		if it.Mode != nil {
			mode = os.FileMode(*it.Mode)
		}
		out[it.Path] = fileContent{[]byte(val), mode}
	}
	return out, nil
}

func (p *provider) projectedFiles(ctx context.Context, r *podRun, v *corev1.ProjectedVolumeSource) (map[string]fileContent, error) {
	out := map[string]fileContent{}
	add := func(m map[string]fileContent) {
		for k, v := range m {
			out[k] = v
		}
	}
	for _, src := range v.Sources {
		switch {
		case src.ConfigMap != nil:
			m, err := p.configMapFiles(ctx, r.pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, v.DefaultMode)
			if err != nil {
				return nil, err
			}
			add(m)
		case src.Secret != nil:
			m, err := p.secretFiles(ctx, r.pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional, v.DefaultMode)
			if err != nil {
				return nil, err
			}
			add(m)
		case src.DownwardAPI != nil:
			m, err := p.downwardAPIFiles(r, src.DownwardAPI.Items, v.DefaultMode)
			if err != nil {
				return nil, err
			}
			add(m)
		case src.ServiceAccountToken != nil:
			// A token bound to this pod from the TokenRequest API, as the kubelet's token manager
			// gets it (the Node authorizer allows it only for pods bound to this node).
			exp := int64(3600)
			if src.ServiceAccountToken.ExpirationSeconds != nil {
				exp = *src.ServiceAccountToken.ExpirationSeconds
			}
			var aud []string
			if src.ServiceAccountToken.Audience != "" {
				aud = []string{src.ServiceAccountToken.Audience}
			}
			sa := r.pod.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			tr, err := p.client.CoreV1().ServiceAccounts(r.pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{
					Audiences:         aud,
					ExpirationSeconds: &exp,
					BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: r.pod.Name, UID: r.pod.UID},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("token for serviceaccount %s/%s: %w", r.pod.Namespace, sa, err)
			}
			out[src.ServiceAccountToken.Path] = fileContent{[]byte(tr.Status.Token), modeOr(v.DefaultMode, 0o644)}
		case src.ClusterTrustBundle != nil:
			return nil, fmt.Errorf("clusterTrustBundle projections are not supported by the process kubelet")
		}
	}
	return out, nil
}

func writeFiles(dir string, files map[string]fileContent) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, rel := range paths {
		if strings.Contains(rel, "..") || filepath.IsAbs(rel) {
			return fmt.Errorf("invalid path %q", rel)
		}
		f := files[rel]
		target := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, f.data, f.mode); err != nil {
			return err
		}
		_ = os.Chmod(target, f.mode)
	}
	return nil
}

// mountPoints: directories and files this kubelet created on the host as bind-mount targets,
// counted per user, removed when the last pod using them is gone (removing a directory that is a
// mount point in another pod's mount namespace would detach that mount).
type mountPoints struct {
	mu    sync.Mutex
	users map[string]int
}

func newMountPoints() *mountPoints { return &mountPoints{users: map[string]int{}} }

// ensure creates target (a directory, or an empty file when file is true) and any missing parents,
// returning every path it created, to be handed back to release.
func (m *mountPoints) ensure(target string, file bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var created []string
	// Missing ancestors, outermost first.
	var missing []string
	for d := filepath.Dir(target); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append([]string{d}, missing...)
	}
	for _, d := range missing {
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return created, err
		}
		created = append(created, d)
	}
	if _, err := os.Lstat(target); os.IsNotExist(err) {
		if file {
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return created, err
			}
			f.Close()
		} else if err := os.Mkdir(target, 0o755); err != nil {
			return created, err
		}
		created = append(created, target)
	}
	// Paths already created by another pod are shared: count this pod as a user too.
	for p, n := range m.users {
		if n > 0 && (p == target || strings.HasPrefix(target, p+"/")) && !contains(created, p) {
			created = append(created, p)
		}
	}
	for _, p := range created {
		m.users[p]++
	}
	return created, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// release drops one use of each path and removes those no longer used, innermost first.
func (m *mountPoints) release(paths []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var free []string
	for _, p := range paths {
		m.users[p]--
		if m.users[p] <= 0 {
			delete(m.users, p)
			free = append(free, p)
		}
	}
	sort.Slice(free, func(i, j int) bool { return len(free[i]) > len(free[j]) })
	for _, p := range free {
		_ = os.Remove(p) // only if empty (a directory) or the placeholder file
	}
}
