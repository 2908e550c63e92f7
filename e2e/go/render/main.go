// Command render turns our knative/ kustomizations into what the e2e harness needs, with the
// upstream code that a cluster would run on them, so that nothing is written by hand:
//
//	render manifests -dir knative/base -sink URL -eventing-config DIR [-oidc]
//	    prints JSON {objects, adapter, oidc}: every object of `kustomize build DIR` (sigs.k8s.io/kustomize/api,
//	    what `kubectl apply -k` runs), and the receive adapter Deployment that the ApiServerSource
//	    reconciler of knative.dev/eventing would create for our ApiServerSource
//	    (pkg/reconciler/apiserversource/resources.MakeReceiveAdapter, after the webhook's SetDefaults and
//	    Validate), its env resolved as the kubelet would (the downward-API NAMESPACE).
//	    -oidc: with the `authentication-oidc` feature on, as the reconcilers then do: each source's OIDC
//	    ServiceAccount (pkg/auth SetupOIDCServiceAccount → GetOIDCServiceAccountForResource, its name in
//	    status.auth.serviceAccountName), the ApiServerSource's Role and RoleBinding that let its adapter
//	    request tokens for it (resources.MakeOIDCRole/MakeOIDCRoleBinding), and the adapter env with
//	    K_AUDIENCE (the sink's audience, as knative.dev/pkg's resolver gives it: spec.sink.audience) and
//	    K_OIDC_SERVICE_ACCOUNT. The objects' owner references (to the sources, which a bare API server
//	    does not serve) are left out.
//	render ping -dir knative/base -sink URL [-token JWT]
//	    sends one tick of every PingSource in DIR the way the mtping adapter does (pkg/adapter/mtping
//	    runner.go at the same tag: the event of makeEvent — type, source, spec.data with
//	    spec.contentType, a random id — through eventing's own adapter client, adapter.NewClient, with
//	    the PingSource's namespace as its env (Kn-Namespace header) and the same retries, 5 × 50 ms
//	    exponential) and prints the answers. -token: the `Authorization: Bearer` the mtping adapter
//	    adds with OIDC on (pkg/adapter/v2 cloudevents.go withAuthHeader; its token provider asks
//	    TokenRequest for the PingSource's OIDC ServiceAccount and the sink's audience — the harness
//	    does that and passes the token).
//
// The sink is the one thing that is not derived: out of cluster the function's Knative Service has
// no address, so the harness passes the URL it listens on; the output names the sink ref it replaces.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	adapter "knative.dev/eventing/pkg/adapter/v2"
	"knative.dev/eventing/pkg/apis/feature"
	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/reconciler/apiserversource/resources"
	reconcilersource "knative.dev/eventing/pkg/reconciler/source"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	"knative.dev/pkg/configmap"
	"knative.dev/pkg/logging"
)

// The reconciler's component name (pkg/reconciler/apiserversource/apiserversource.go) and the
// namespace Knative Eventing is installed in (config/core/*.yaml).
const (
	component       = "apiserversource"
	systemNamespace = "knative-eventing"
)

type adapterOut struct {
	SourceName         string            `json:"sourceName"`
	SourceNamespace    string            `json:"sourceNamespace"`
	Mode               string            `json:"mode"`
	ServiceAccountName string            `json:"serviceAccountName"`
	SinkRef            any               `json:"sinkRef"`
	Env                []corev1.EnvVar   `json:"env"`
	Labels             map[string]string `json:"labels"`
	// The container as MakeReceiveAdapter builds it, for the record (probes, ports, security).
	Container corev1.Container `json:"container"`
}

// With -oidc: what the reconcilers create for event-delivery authentication, and who sends what.
type oidcOut struct {
	// The sources' OIDC ServiceAccounts, the ApiServerSource's token Role and RoleBinding.
	Objects []any `json:"objects"`
	// Per source (kind/name): the OIDC ServiceAccount it sends tokens of, and their audience.
	Senders []oidcSender `json:"senders"`
}

type oidcSender struct {
	Kind           string `json:"kind"`
	Name           string `json:"name"`
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
	Audience       string `json:"audience"`
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: render {manifests|ping} -dir DIR -sink URL [-eventing-config DIR]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "", "kustomization directory")
	sink := fs.String("sink", "", "URL that stands for the function's address")
	eventingConfig := fs.String("eventing-config", "", "knative.dev/eventing's config/core/configmaps directory")
	oidc := fs.Bool("oidc", false, "the authentication-oidc feature is on")
	token := fs.String("token", "", "ping: the bearer token the mtping adapter would send")
	_ = fs.Parse(os.Args[2:])
	if *dir == "" || *sink == "" {
		fail("-dir and -sink are required")
	}
	objects := build(*dir)
	switch os.Args[1] {
	case "manifests":
		if *eventingConfig == "" {
			fail("-eventing-config is required")
		}
		flags := feature.Flags{}
		if *oidc {
			flags[feature.OIDCAuthentication] = feature.Enabled
		}
		out := map[string]any{"objects": objects, "adapter": receiveAdapter(objects, *sink, *eventingConfig, flags)}
		if *oidc {
			out["oidc"] = oidcObjects(objects)
		}
		b, err := json.Marshal(out)
		check(err)
		fmt.Println(string(b))
	case "ping":
		ping(objects, *sink, *token)
	default:
		fail("unknown command " + os.Args[1])
	}
}

func build(dir string) []map[string]any {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	check(err)
	var objects []map[string]any
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		check(err)
		objects = append(objects, m)
	}
	return objects
}

func ofKind(objects []map[string]any, apiVersion, kind string) []map[string]any {
	var found []map[string]any
	for _, o := range objects {
		if o["apiVersion"] == apiVersion && o["kind"] == kind {
			found = append(found, o)
		}
	}
	return found
}

func convert(in map[string]any, out any) {
	b, err := json.Marshal(in)
	check(err)
	check(json.Unmarshal(b, out))
}

func receiveAdapter(objects []map[string]any, sink, eventingConfig string, flags feature.Flags) adapterOut {
	sources := ofKind(objects, "sources.knative.dev/v1", "ApiServerSource")
	if len(sources) != 1 {
		fail(fmt.Sprintf("expected one ApiServerSource, found %d", len(sources)))
	}
	src := &sourcesv1.ApiServerSource{}
	convert(sources[0], src)
	ctx := feature.ToContext(context.Background(), flags)
	// What the eventing webhook does on create, before the reconciler ever sees the object.
	src.SetDefaults(ctx)
	if errs := src.Validate(ctx); errs != nil {
		fail("the eventing webhook would reject the ApiServerSource: " + errs.Error())
	}
	check(os.Setenv("SYSTEM_NAMESPACE", systemNamespace)) // read by system.Namespace() in makeEnv
	cms := []*corev1.ConfigMap{readConfigMap(filepath.Join(eventingConfig, "logging.yaml")), readConfigMap(filepath.Join(eventingConfig, "observability.yaml"))}
	configs := reconcilersource.WatchConfigurations(logging.WithLogger(ctx, logging.FromContext(ctx)), component, configmap.NewStaticWatcher(cms...))
	// namespacesFromSelector: no namespaceSelector => only the source's own namespace;
	// an empty selector => all namespaces (isEmptySelector). Ours watch one namespace.
	if src.Spec.NamespaceSelector != nil {
		fail("namespaceSelector is not supported by this harness (the reconciler lists namespaces for it)")
	}
	var audience *string
	if flags.IsOIDCAuthentication() {
		// ReconcileKind: auth.SetupOIDCServiceAccount puts the OIDC ServiceAccount's name in
		// status.auth, and createReceiveAdapter passes the resolved sink's audience.
		name := auth.GetOIDCServiceAccountNameForResource(sourcesv1.SchemeGroupVersion.WithKind("ApiServerSource"), src.ObjectMeta)
		src.Status.Auth = &duckv1.AuthStatus{ServiceAccountName: &name}
		audience = sinkAudience(src.Spec.Sink)
	}
	deployment, err := resources.MakeReceiveAdapter(&resources.ReceiveAdapterArgs{
		Image:      "apiserver_receive_adapter",
		Source:     src,
		Labels:     resources.Labels(src.Name),
		SinkURI:    sink,
		Audience:   audience,
		Configs:    configs,
		Namespaces: []string{src.Namespace},
	})
	check(err)
	container := deployment.Spec.Template.Spec.Containers[0]
	env := make([]corev1.EnvVar, 0, len(container.Env))
	for _, e := range container.Env {
		if e.ValueFrom != nil {
			// The only downward-API value makeEnv uses; the pod runs in the source's namespace.
			if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
				fail("unexpected valueFrom in the adapter's env: " + e.Name)
			}
			e = corev1.EnvVar{Name: e.Name, Value: deployment.Namespace}
		}
		env = append(env, e)
	}
	return adapterOut{
		SourceName:         src.Name,
		SourceNamespace:    src.Namespace,
		Mode:               src.Spec.EventMode,
		ServiceAccountName: deployment.Spec.Template.Spec.ServiceAccountName,
		SinkRef:            src.Spec.Sink.Ref,
		Env:                env,
		Labels:             deployment.Labels,
		Container:          container,
	}
}

// sinkAudience is the audience knative.dev/pkg's resolver gives a sink (resolver
// AddressableFromDestinationV1: spec.sink.audience when set, else the addressable's
// status.address.audience). Out of cluster there is no addressable to read, so only the first.
func sinkAudience(sink duckv1.Destination) *string {
	if sink.Audience == nil || *sink.Audience == "" {
		fail("with -oidc the sink needs spec.sink.audience (this harness cannot read the addressable's status.address.audience)")
	}
	return sink.Audience
}

// oidcObjects: what the ApiServerSource and PingSource reconcilers create with authentication-oidc on.
func oidcObjects(objects []map[string]any) oidcOut {
	out := oidcOut{}
	withoutOwners := func(meta *metav1.ObjectMeta) { meta.OwnerReferences = nil }
	for _, o := range ofKind(objects, "sources.knative.dev/v1", "ApiServerSource") {
		src := &sourcesv1.ApiServerSource{}
		convert(o, src)
		src.SetDefaults(context.Background())
		gvk := sourcesv1.SchemeGroupVersion.WithKind("ApiServerSource")
		sa := addSender(&out, gvk, src.ObjectMeta, src.Spec.Sink)
		src.Status.Auth = &duckv1.AuthStatus{ServiceAccountName: &sa}
		role, err := resources.MakeOIDCRole(src)
		check(err)
		binding, err := resources.MakeOIDCRoleBinding(src)
		check(err)
		withoutOwners(&role.ObjectMeta)
		withoutOwners(&binding.ObjectMeta)
		role.APIVersion, role.Kind = "rbac.authorization.k8s.io/v1", "Role"
		binding.APIVersion, binding.Kind = "rbac.authorization.k8s.io/v1", "RoleBinding"
		out.Objects = append(out.Objects, role, binding)
	}
	for _, o := range ofKind(objects, "sources.knative.dev/v1", "PingSource") {
		src := &sourcesv1.PingSource{}
		convert(o, src)
		src.SetDefaults(context.Background())
		addSender(&out, sourcesv1.SchemeGroupVersion.WithKind("PingSource"), src.ObjectMeta, src.Spec.Sink)
	}
	return out
}

func addSender(out *oidcOut, gvk schema.GroupVersionKind, meta metav1.ObjectMeta, sink duckv1.Destination) string {
	sa := auth.GetOIDCServiceAccountForResource(gvk, meta)
	sa.OwnerReferences = nil
	sa.APIVersion, sa.Kind = "v1", "ServiceAccount"
	out.Objects = append(out.Objects, sa)
	out.Senders = append(out.Senders, oidcSender{
		Kind: gvk.Kind, Name: meta.Name, Namespace: meta.Namespace, ServiceAccount: sa.Name, Audience: *sinkAudience(sink),
	})
	return sa.Name
}

func readConfigMap(path string) *corev1.ConfigMap {
	b, err := os.ReadFile(path)
	check(err)
	cm := &corev1.ConfigMap{}
	check(yaml.Unmarshal(b, cm))
	return cm
}

func ping(objects []map[string]any, sink, token string) {
	for _, o := range ofKind(objects, "sources.knative.dev/v1", "PingSource") {
		src := &sourcesv1.PingSource{}
		convert(o, src)
		src.SetDefaults(context.Background())
		// newPingSourceClient: the source's namespace, the adapter's name, the resolved sink.
		client, err := adapter.NewClient(adapter.ClientConfig{
			Env:         &adapter.EnvConfig{Namespace: src.Namespace, Name: "mt-ping", Sink: sink},
			CeOverrides: src.Spec.CloudEventOverrides,
		})
		check(err)
		event := cloudevents.NewEvent()
		event.SetType(sourcesv1.PingSourceEventType)
		event.SetSource(sourcesv1.PingSourceSource(src.Namespace, src.Name))
		if src.Spec.CloudEventOverrides != nil {
			for k, v := range src.Spec.CloudEventOverrides.Extensions {
				event.SetExtension(k, v)
			}
		}
		if src.Spec.Data != "" {
			check(event.SetData(src.Spec.ContentType, []byte(src.Spec.Data)))
		}
		event.SetID(uuid.New().String())
		ctx := cloudevents.ContextWithTarget(context.Background(), sink)
		if token != "" {
			headers := cehttp.HeaderFrom(ctx)
			headers.Set("Authorization", "Bearer "+token)
			ctx = cehttp.WithCustomHeader(ctx, headers)
		}
		ctx = cloudevents.ContextWithRetriesExponentialBackoff(ctx, 50*time.Millisecond, 5)
		result := client.Send(ctx, event)
		b, _ := json.Marshal(map[string]any{"pingSource": src.Name, "id": event.ID(), "ack": cloudevents.IsACK(result), "result": fmt.Sprint(result)})
		fmt.Println(string(b))
		if !cloudevents.IsACK(result) {
			os.Exit(3)
		}
	}
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "render:", msg)
	os.Exit(1)
}
