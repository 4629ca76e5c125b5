package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// ProjectName is the compose project name (the file's `name:`).
const ProjectName = "walletsaga"

// LoadCompose loads root/docker-compose.yml with the compose-spec loader that `docker compose`
// itself uses: schema validation, interpolation ($$ becomes $), YAML merge keys,
// normalisation and consistency checks (every depends_on target exists, …), with every
// profile enabled (grafana, demo). The process environment is not consulted, so the host
// cannot change what is loaded: each ${VAR:-default} is its default.
func LoadCompose(ctx context.Context, root string) (*types.Project, error) {
	dir, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	opts, err := cli.NewProjectOptions(
		[]string{filepath.Join(dir, "docker-compose.yml")},
		cli.WithName(ProjectName),
		cli.WithWorkingDirectory(dir),
		cli.WithProfiles([]string{"*"}),
	)
	if err != nil {
		return nil, err
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker-compose.yml: %w", err)
	}
	return p, nil
}

// Environment returns the environment compose gives svc's containers. A variable listed
// without a value (taken from the host at `up`) is an error: the stack must not depend on the
// host's environment.
func Environment(svc types.ServiceConfig) (map[string]string, error) {
	env := make(map[string]string, len(svc.Environment))
	for k, v := range svc.Environment {
		if v == nil {
			return nil, fmt.Errorf("service %s: environment variable %s has no value", svc.Name, k)
		}
		env[k] = *v
	}
	return env, nil
}

// TopicsService is the one-shot service that creates the topics.
const TopicsService = "topics"

var createLine = regexp.MustCompile(`(?m)^\s*create\s+(\S+)\s+([0-9]+)\s*$`)

// Topics returns what the topics service creates, topic name → queues, read from the
// `create TOPIC QUEUES` lines of its script. deploy/rocketmq_test.go runs that script against a
// stand-in mqadmin, which holds this reading to what the script does.
func Topics(p *types.Project) (map[string]int, error) {
	svc, err := p.GetService(TopicsService)
	if err != nil {
		return nil, err
	}
	if len(svc.Command) != 3 || svc.Command[0] != "bash" || svc.Command[1] != "-c" {
		return nil, fmt.Errorf("service %s: command is not [bash -c SCRIPT]: %q", TopicsService, svc.Command)
	}
	topics := map[string]int{}
	for _, m := range createLine.FindAllStringSubmatch(svc.Command[2], -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, err
		}
		if _, dup := topics[m[1]]; dup {
			return nil, fmt.Errorf("service %s: topic %s created twice", TopicsService, m[1])
		}
		topics[m[1]] = n
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("service %s: no `create TOPIC QUEUES` line", TopicsService)
	}
	return topics, nil
}
