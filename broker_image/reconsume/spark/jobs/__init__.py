"""Dead-letter jobs on Spark: ``reconsume dlq drain|reprocess|purge`` (see main.py)."""
