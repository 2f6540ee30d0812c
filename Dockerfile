# oncelog broker: single node, data on the /data volume, Kafka clients connect to port 9092.
FROM python:3.11-slim
WORKDIR /opt/oncelog
COPY pyproject.toml uv.lock README.md ./
COPY broker broker
COPY protocol protocol
COPY storage storage
COPY client client
RUN pip install --no-cache-dir uv \
    && UV_PYTHON_DOWNLOADS=never uv sync --frozen --no-dev \
    && rm -rf /root/.cache
VOLUME /data
EXPOSE 9092
# Advertise what clients outside the container dial; override with --advertise HOST:PORT.
ENTRYPOINT ["/opt/oncelog/.venv/bin/oncelog", "broker", "--data-dir", "/data", "--listen", "0.0.0.0:9092"]
CMD ["--advertise", "localhost:9092"]
