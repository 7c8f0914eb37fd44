"""reconsume: retry topology for message-queue consumer groups.

The import package holds everything that is not Kubernetes-specific: the message model and
record codec, the broker's message store, the retry and schedule engine, the RocketMQ
remoting protocol, the servers, the client and the topology reconciler.
"""

__version__ = "0.1.0"
"""The version of the package, of the three images' tags and of the Helm chart (its version
and appVersion; ``tools/check_version.py`` checks that they agree)."""
