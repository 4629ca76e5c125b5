# The image of the compose stack: /walletsvc, /notifier, /providersim and /demo, static (CGO_ENABLED=0),
# run as a non-root user. docker-compose.yml picks the binary per service.
#
# The two upstream images are named by one variable each (a build argument; docker-compose.yml
# passes the variable of the same name when it is set): GO_IMAGE, the builder, and
# RUNTIME_IMAGE, the runtime base. A machine that reaches no image registry builds local
# stand-ins for them (deploy/standins/build.sh) and sets both.
#
# WALLETSAGA_VERSION and WALLETSAGA_REVISION (git describe, git rev-parse HEAD) are what each
# binary's --version and walletsaga_build_info say and what the image's OCI labels say:
# scripts/release.sh records them the same way (the Go toolchain stamps nothing here: the
# build context has no .git). Unset, the binaries say "(devel)" and "unknown".
#
# BuildKit (Docker 23 and later by default; DOCKER_BUILDKIT=1 before) keeps the module cache
# and the build cache between builds: a rebuild downloads and compiles only what changed, and
# `go build` downloads only the modules the four binaries import (not the lint and test
# tools go.mod also requires).
ARG GO_IMAGE=golang:1.27.3-trixie
ARG RUNTIME_IMAGE=busybox:1.37.0

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
# The whole context (.dockerignore keeps .git, .run and build outputs out): go.mod replaces
# github.com/apache/rocketmq-client-go/v2 with ./third_party/rocketmq-client-go.
COPY . .
ARG WALLETSAGA_VERSION=
ARG WALLETSAGA_REVISION=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
	pkg=github.com/walletsaga/walletsaga/internal/buildinfo \
	&& go build -ldflags="-s -w -X $pkg.version=$WALLETSAGA_VERSION -X $pkg.revision=$WALLETSAGA_REVISION" \
		-o /out/ ./cmd/walletsvc ./cmd/notifier ./cmd/providersim ./cmd/demo \
	&& /out/walletsvc --version

# busybox rather than scratch: its wget runs the compose health checks on /readyz.
FROM ${RUNTIME_IMAGE}
ARG WALLETSAGA_VERSION=
ARG WALLETSAGA_REVISION=
LABEL org.opencontainers.image.title="walletsaga" \
	org.opencontainers.image.description="walletsvc, notifier, providersim and demo" \
	org.opencontainers.image.source="https://github.com/walletsaga/walletsaga" \
	org.opencontainers.image.version="${WALLETSAGA_VERSION}" \
	org.opencontainers.image.revision="${WALLETSAGA_REVISION}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/walletsvc /out/notifier /out/providersim /out/demo /
USER 65532:65532
EXPOSE 8080 8081 8082 4318
CMD ["/walletsvc", "serve"]
