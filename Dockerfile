# baton in a container: built with the shipped profile, run as an unprivileged user on a small
# Debian image holding only the binary and the CA certificates (for the platforms' HTTPS APIs).
#
#   docker build -t baton .
#   docker volume create baton-data
#   export BATON_API_TOKEN=$(openssl rand -hex 32)
#   docker run -d -v $PWD/baton.toml:/etc/baton/baton.toml:ro -v baton-data:/var/lib/baton \
#       -e BATON_API_TOKEN -p 8642:8642 baton
#
# The database lives in /var/lib/baton (the working directory): keep it on a volume, or it goes
# with the container. Clients reach a container through a forwarded port, never from loopback,
# so the config must name the token (`[gateway] api_token_env = "BATON_API_TOKEN"`); without it
# every request but /healthz, /readyz and /hooks is refused with 403. Pass the platform and
# model secrets the config's *_env keys name with -e too. docs/operations.md, "Container".
#
# Several instances on one PostgreSQL database: deploy/compose.yaml.

FROM rust:bookworm AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --locked --profile dist --bin baton \
    && cp target/dist/baton /usr/local/bin/baton

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/baton --create-home baton
COPY --from=builder /usr/local/bin/baton /usr/local/bin/baton
USER baton
WORKDIR /var/lib/baton
ENV BATON_CONFIG=/etc/baton/baton.toml
EXPOSE 8642
# The config's `gateway.listen` must be "0.0.0.0:8642" to be reachable from outside the
# container; --listen says so here whatever the file has.
ENTRYPOINT ["baton"]
CMD ["run", "--listen", "0.0.0.0:8642"]
