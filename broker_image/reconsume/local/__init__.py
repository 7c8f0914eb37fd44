"""Embedded mode: name server, brokers, topology and dead-letter jobs on one machine, from
manifests, without Kubernetes."""
