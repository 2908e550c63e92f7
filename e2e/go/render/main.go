// Command render turns our knative/ kustomizations into what the e2e harness needs, with the
// upstream code that a cluster would run on them, so that nothing is written by hand:
//
//	render manifests -dir knative/base -sink URL -eventing-config DIR
//	    prints JSON {objects, adapter}: every object of `kustomize build DIR` (sigs.k8s.io/kustomize/api,
//	    what `kubectl apply -k` runs), and the receive adapter Deployment that the ApiServerSource
//	    reconciler of knative.dev/eventing would create for our ApiServerSource
//	    (pkg/reconciler/apiserversource/resources.MakeReceiveAdapter, after the webhook's SetDefaults and
//	    Validate), its env resolved as the kubelet would (the downward-API NAMESPACE).
//	render ping -dir knative/base -sink URL
//	    sends one tick of every PingSource in DIR the way the mtping adapter does (pkg/adapter/mtping
//	    runner.go at the same tag: the event of makeEvent — type, source, spec.data with
//	    spec.contentType, a random id — through eventing's own adapter client, adapter.NewClient, with
//	    the PingSource's namespace as its env (Kn-Namespace header) and the same retries, 5 × 50 ms
//	    exponential) and prints the answers.
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

	adapter "knative.dev/eventing/pkg/adapter/v2"
	"knative.dev/eventing/pkg/apis/feature"
	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/eventing/pkg/reconciler/apiserversource/resources"
	reconcilersource "knative.dev/eventing/pkg/reconciler/source"
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

func main() {
	if len(os.Args) < 2 {
		fail("usage: render {manifests|ping} -dir DIR -sink URL [-eventing-config DIR]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "", "kustomization directory")
	sink := fs.String("sink", "", "URL that stands for the function's address")
	eventingConfig := fs.String("eventing-config", "", "knative.dev/eventing's config/core/configmaps directory")
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
		out := map[string]any{"objects": objects, "adapter": receiveAdapter(objects, *sink, *eventingConfig)}
		b, err := json.Marshal(out)
		check(err)
		fmt.Println(string(b))
	case "ping":
		ping(objects, *sink)
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

func receiveAdapter(objects []map[string]any, sink, eventingConfig string) adapterOut {
	sources := ofKind(objects, "sources.knative.dev/v1", "ApiServerSource")
	if len(sources) != 1 {
		fail(fmt.Sprintf("expected one ApiServerSource, found %d", len(sources)))
	}
	src := &sourcesv1.ApiServerSource{}
	convert(sources[0], src)
	ctx := feature.ToContext(context.Background(), feature.Flags{})
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
	deployment, err := resources.MakeReceiveAdapter(&resources.ReceiveAdapterArgs{
		Image:      "apiserver_receive_adapter",
		Source:     src,
		Labels:     resources.Labels(src.Name),
		SinkURI:    sink,
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

func readConfigMap(path string) *corev1.ConfigMap {
	b, err := os.ReadFile(path)
	check(err)
	cm := &corev1.ConfigMap{}
	check(yaml.Unmarshal(b, cm))
	return cm
}

func ping(objects []map[string]any, sink string) {
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
