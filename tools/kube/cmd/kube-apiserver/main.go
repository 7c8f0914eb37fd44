// Command kube-apiserver is the Kubernetes API server, unchanged (upstream cmd/kube-apiserver).
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
