"""What kube-apiserver does to a reconsume manifest before it stores it, for embedded mode:
structural-schema validation, defaults, pruning, metadata checks and the CRDs' CEL rules
(:mod:`reconsume.apiserver.cel`), against the same CRDs the chart installs (``crds/`` is a
byte-identical copy of the top-level one). The k8s tier checks this emulation against a real
API server, so that a manifest ``reconsume up`` accepts is one ``kubectl apply`` accepts."""
