# oncelog broker: single node, data on the /data volume, Kafka clients connect to port 9092.
#   docker build -t oncelog .
#   docker run --rm -p 9092:9092 -v oncelog-data:/data oncelog
# tests/packaging/test_docker_image.py runs this file's build commands and start command outside Docker.

# Build stage: the wheel of the source tree, then a virtual environment holding it with uv.lock's dependencies.
FROM python:3.11-slim AS build
RUN pip install --no-cache-dir uv
ENV UV_PYTHON_DOWNLOADS=never
WORKDIR /src
COPY pyproject.toml setup.py uv.lock README.md ./
COPY broker broker
COPY protocol protocol
COPY storage storage
COPY client client
COPY pipeline pipeline
RUN uv build --wheel --out-dir /dist .
RUN uv export --frozen --no-dev --no-emit-project --no-hashes --quiet --output-file /dist/requirements.txt
RUN uv venv --quiet /opt/oncelog
RUN uv pip install --quiet --python /opt/oncelog/bin/python -r /dist/requirements.txt /dist/*.whl

# Run stage: that environment only (no uv, no source tree), run by an unprivileged user.
FROM python:3.11-slim
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin oncelog \
    && mkdir /data && chown oncelog:oncelog /data
COPY --from=build /opt/oncelog /opt/oncelog
ENV PATH=/opt/oncelog/bin:$PATH
USER oncelog
VOLUME /data
EXPOSE 9092
# Healthy once the broker answers a Kafka Metadata request on its listener.
HEALTHCHECK --interval=10s --timeout=10s --start-period=30s --retries=3 CMD ["oncelog", "topic", "list", "--bootstrap-server", "127.0.0.1:9092"]
# Advertise what clients outside the container dial; override with --advertise HOST:PORT.
ENTRYPOINT ["oncelog", "broker", "--data-dir", "/data", "--listen", "0.0.0.0:9092"]
CMD ["--advertise", "localhost:9092"]
