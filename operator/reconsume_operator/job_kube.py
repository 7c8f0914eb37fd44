"""What the DeadLetterJob handlers need of the API server beyond applying and getting objects:
listing by label, deleting, writing a custom resource's status (the writer's), and whether a CRD
is served.
One :class:`JobKube` is the operator's :class:`~reconsume_operator.kube.ChildWriter` (one API
client per process). Blocking, like the writer: call it in a thread."""

from __future__ import annotations

from reconsume_operator.kube import ChildWriter


class JobKube(ChildWriter):
    def serves(self, crd: str, version: str) -> bool:
        """Whether the CustomResourceDefinition ``crd`` exists and serves ``version``."""
        found = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd)
        if found is None:
            return False
        versions = (found.get("spec") or {}).get("versions") or ()
        return any(v.get("name") == version and v.get("served") for v in versions)
