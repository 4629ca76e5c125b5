# Static, non-root images of both binaries.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY third_party ./third_party
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/walletsvc ./cmd/walletsvc && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/notifier ./cmd/notifier

FROM scratch
COPY --from=build /out/walletsvc /out/notifier /
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT []
