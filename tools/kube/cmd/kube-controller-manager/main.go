// Command kube-controller-manager runs Kubernetes' controllers, unchanged (upstream
// cmd/kube-controller-manager).
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as in the upstream main

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	command := app.NewControllerManagerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
