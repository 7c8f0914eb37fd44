"""HTTP/2 (RFC 9113) with HPACK (RFC 7541), server side, and gRPC over it: what the broker's
gRPC port speaks to RocketMQ 5's clients, on the broker's own event loop."""
