"""Fixtures of the Spark pipeline tests: one SparkSession for the whole package (Spark starts slowly) in
local[2,2] (two cores, a failed task is retried once), Java 17, the venv's Python for the workers, and Spark's own
Kafka connector on its classpath (``spark.jars``, fetched by ``support.kafka_jars.ensure_spark_kafka``) so that
``format("kafka")`` and ``format("oncelog")`` are tested in the same session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

JAVA17_HOMES = (
    "/usr/lib/jvm/java-17-openjdk-amd64",
    "/usr/lib/jvm/openjdk-17",
    "/usr/lib/jvm/java-1.17.0-openjdk-amd64",
)

if not os.environ.get("JAVA_HOME"):
    for home in JAVA17_HOMES:
        if os.path.exists(os.path.join(home, "bin", "java")):
            os.environ["JAVA_HOME"] = home
            break
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from oncelog.pipeline.spark import OncelogDataSource
    from pyspark.sql import SparkSession
    from support.kafka_jars import ensure_spark_kafka

    connector_jars = ",".join(str(jar) for jar in ensure_spark_kafka())

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("oncelog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .config("spark.jars", connector_jars)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(OncelogDataSource)
    try:
        yield session
    finally:
        session.stop()
