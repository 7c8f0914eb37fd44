"""The gRPC service of Apache RocketMQ 5's clients (``apache.rocketmq.v2.MessagingService``),
served by every broker beside its remoting port.

Apache RocketMQ puts a proxy between its 5.x clients and the brokers. Here each broker serves
the protocol itself, as RocketMQ's proxy does in its "local" mode: a request becomes the
remoting request the broker already serves and runs through the broker's own dispatcher in
process (:mod:`.local`) — the same checks, access control, store, replication and retry
engine as a 4.x client's — with no extra hop. Routes name each queue's own broker's gRPC
endpoint, so a client sends to and receives from the broker that holds the queue.
"""
