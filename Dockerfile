# The Kant scheduler image: `kant` alone on distroless, running as a non-root user.
#
#   docker build -t REGISTRY/kant:TAG .
#   docker push REGISTRY/kant:TAG
#
# then set that image in manifests/deployment.yaml.
#
# NOTE: this Dockerfile has not been built: the machine it was written on has no Docker
# engine. The cargo steps in it are the ones the project builds with.

# --- builder: dependencies first, in their own layer, so that a source change rebuilds
# only Kant itself.
FROM rust:1.95-bookworm AS builder
WORKDIR /src

# The workspace's manifests (the root crate and the testkit member) and the lock file.
COPY Cargo.toml Cargo.lock ./
COPY testkit/Cargo.toml testkit/Cargo.toml

# Stub targets so that cargo can load the workspace (declared benches must exist) and
# build every dependency of the binary.
RUN mkdir -p src benches testkit/src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs testkit/src/lib.rs \
 && awk '/^\[\[bench\]\]/ { bench = 1 } bench && /^name *=/ { gsub(/"/, "", $3); print $3; bench = 0 }' Cargo.toml \
    | while read -r name; do echo 'fn main() {}' > "benches/$name.rs"; done \
 && cargo build --release --locked --bin kant \
 && rm -rf target/release/.fingerprint/kant-* target/release/deps/kant-* \
           target/release/deps/libkant-* target/release/kant

# The sources. COPY keeps the files' own modification times, which may be older than the
# stubs' build: touch them so that cargo rebuilds Kant rather than keeping the stub.
COPY . .
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin kant \
 && strip --strip-debug target/release/kant

# --- runtime: glibc and libgcc only (rustls with ring needs no libssl), user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/kant /usr/local/bin/kant
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kant"]
CMD ["run"]
