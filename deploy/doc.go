// Package deploy holds what runs the stack outside `make services`: the broker configuration
// of the Docker Compose stack (rocketmq/broker.conf; docker-compose.yml and Dockerfile live at
// the repository root) and LoadCompose, which the tests use to read docker-compose.yml the way
// `docker compose` does, since no Docker engine runs where the tests do; the Prometheus
// alerting and recording rules (prometheus/rules.yml), which its tests check with promtool,
// and the compose stack's Prometheus configuration (prometheus/prometheus.yml); and the
// Grafana dashboards with their provisioning (grafana/), whose queries its tests parse with
// Prometheus's PromQL parser against the metrics the binaries serve.
package deploy
