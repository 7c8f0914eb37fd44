"""Compat tier: real RocketMQ clients, written by others, against reconsume's servers."""
