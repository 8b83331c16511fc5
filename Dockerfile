# One small image for both processes: `fuyao-hub serve ...` (default) and `fuyao-agent ...`.
#   docker build -t ghcr.io/fuyao/fuyao:0.1.0 .
#   docker run --rm -p 8848:8848 -p 8849:8849 -p 8851:8851 ghcr.io/fuyao/fuyao:0.1.0 \
#       fuyao-hub serve --host 0.0.0.0 --home /var/lib/fuyao
#   docker run --rm ghcr.io/fuyao/fuyao:0.1.0 fuyao-agent --help
# Runs as uid 10001 (non-root), works with a read-only root filesystem: state goes to
# /var/lib/fuyao (mount a volume), scratch to /tmp (mount an emptyDir).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY fuyao fuyao
COPY hub hub
COPY member_agent member_agent
COPY fuyaoctl fuyaoctl
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /var/lib/fuyao fuyao \
    && mkdir -p /var/lib/fuyao && chown 10001:10001 /var/lib/fuyao
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 FUYAO_HOME=/var/lib/fuyao
USER 10001:10001
WORKDIR /var/lib/fuyao
EXPOSE 8848 8849 8851
CMD ["fuyao-hub", "serve", "--host", "0.0.0.0"]
