"""Tests of reconsume.message: the message model, ids, names and the record codec."""
