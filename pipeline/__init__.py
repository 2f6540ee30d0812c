"""oncelog.pipeline: moving data between oncelog and data-processing engines (PySpark: ``oncelog.pipeline.spark``).

The Spark data source needs the ``spark`` extra (pyspark >= 4.1, pyarrow, numpy); the other modules need only the
bundled client, pyarrow and (``partitioning``, ``txn_task``) numpy.
"""
