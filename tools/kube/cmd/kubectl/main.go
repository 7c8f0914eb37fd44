// Command kubectl is Kubernetes' command-line client, unchanged (upstream cmd/kubectl).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // client auth plugins, as upstream
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
