"""The demos: ``reconsume demo`` (:mod:`reconsume.demo.run`: an order consumer whose payment
service is down, retries, dead letters and dead-letter jobs on embedded mode) and ``reconsume
store crash-demo`` (:mod:`reconsume.demo.crash`: a writer killed mid-flight, every acknowledged
message recovered)."""
