"""Compaction: the Spark job (job.py, run by spark-submit) and, later, its launchers."""
