# The image of the compose stack: /walletsvc, /notifier, /providersim and /demo, static (CGO_ENABLED=0),
# run as a non-root user. docker-compose.yml picks the binary per service.
FROM golang:1.27.3-trixie AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
# go.mod replaces github.com/apache/rocketmq-client-go/v2 with ./third_party/rocketmq-client-go,
# so the replacement has to be in place before `go mod download` reads the module graph.
COPY go.mod go.sum ./
COPY third_party/rocketmq-client-go ./third_party/rocketmq-client-go
RUN go mod download
COPY . .
RUN go build -ldflags="-s -w" -o /out/ ./cmd/walletsvc ./cmd/notifier ./cmd/providersim ./cmd/demo

# busybox rather than scratch: its wget runs the compose health checks on /readyz.
FROM busybox:1.37.0
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/walletsvc /out/notifier /out/providersim /out/demo /
USER 65532:65532
EXPOSE 8080 8081 8082
CMD ["/walletsvc", "serve"]
