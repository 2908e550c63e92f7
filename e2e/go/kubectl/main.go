// Command kubectl is upstream's kubectl, built from the published k8s.io/kubectl module at the
// release of the e2e's Kubernetes (k8s.io/kubernetes cmd/kubectl/kubectl.go does the same three
// calls). The manifest tests of `npm test` use it for `kubectl kustomize` and against the API-server
// emulator; a fresh Debian machine has no kubectl with kustomize v5 (Debian's is 1.20).
// Its own module, not a command of e2e/go/kube: changing that module's inputs rebuilds Kubernetes.
// The client auth plugins upstream imports are left out: the tests use a kubeconfig with a token.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
