// Command kube-apiserver: Kubernetes' own API server, unchanged (its command from k8s.io/kubernetes).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
