"""Embedded mode: name server, brokers, topology and dead-letter jobs on one machine, from
manifests, without Kubernetes (``reconsume up``, ``reconsume status``).

Manifests are checked as the API server would check them (:mod:`reconsume.apiserver`), then
reconciled by the same topology code the operator runs (:mod:`reconsume.topology`)."""
