// Command kube-apiserver is the Kubernetes API server, unchanged, for the k8s test tier.
//
// k8s.io/kubernetes cannot be installed with `go install` (its go.mod has replace directives
// for the staging modules), so this module requires it as a library and replaces each staging
// module by its published release. Built and cached by `make k8s-deps`.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as in the upstream main

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
