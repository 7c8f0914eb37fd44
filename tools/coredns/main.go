// Command coredns is CoreDNS with the plugins a cluster's DNS needs (kubernetes, cache,
// health, ready, errors, log, loop, reload, loadbalance), in CoreDNS's own plugin order.
// CoreDNS documents this way of building it with a chosen set of plugins; the full set would
// pull every cloud provider's SDK into the build.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is CoreDNS's plugin.cfg order, restricted to the plugins above: a request passes
// through them in this order whatever the order in the Corefile.
var directives = []string{
	"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
