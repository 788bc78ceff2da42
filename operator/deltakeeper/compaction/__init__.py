"""Compaction's Spark side: the job (job.py, which spark-submit or a SparkApplication runs;
it imports only PySpark, delta-spark and the standard library), how a job is started and
followed whatever runs it (launcher.py), the spark-submit launcher of the CLI and standalone
mode (submit.py), and a table's storage as Spark sees it (spark_storage.py). The operator's
SparkApplication launcher is on the Kubernetes side, in k8s/."""
