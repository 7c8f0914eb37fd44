"""The Kubernetes operator for reconsume (Kopf handlers, object builders, status reporting).

Only this package imports ``kopf`` or ``kubernetes``; the reconcile logic it drives lives
in :mod:`reconsume.topology`.
"""
