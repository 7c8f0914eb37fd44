"""Reading reconsume topics, dead-letter queues included, from PySpark (the ``spark`` extra).

``reconsume.spark.source.ReconsumeDataSource`` is a Python data source named ``reconsume``::

    spark.dataSource.register(ReconsumeDataSource)
    frame = spark.read.format("reconsume").option("nameServer", "ns:9876").option(
        "deadLetterGroup", "orders-consumer"
    ).load()
"""
