# Rackpilot. `make run` serves the portal with the demo cluster; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# Test processes (pytest-xdist; each has its own test database). Many tests wait on subprocesses, sshd or a browser,
# so more processes than cores keep the cores busy: on 2 cores beside two CPU burners, 6 ran the suite in 17:00 where
# 4 took 18:31. `make test TEST_WORKERS=2` on a small machine.
TEST_WORKERS ?= 6
# The suite starts hundreds of Python processes (test processes, live servers, workers): each compiled the portal
# again where the environment turns the bytecode cache off (collecting the suite: 7.0 s a process, 1.9 s cached).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: run test lint up bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Reinstall whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/python manage.py serve --port $(PORT)

test: install
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=15

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python manage.py check
	$(BIN)/python manage.py makemigrations --check --dry-run

# The services wiring: ASGI server, the simulated exporters and Prometheus (when installed), a job worker (-Q jobs), a system worker (-Q system: reaper, pruning, settle) and
# beat (which also reaps in-process) as separate processes against PostgreSQL and Redis (docs/scaling.md).
up: install
	@test -n "$$DATABASE_URL" -a -n "$$REDIS_URL" -a -n "$$RACKPILOT_SECRET_KEY" -a -n "$$RACKPILOT_SECRETS_KEY" || \
		{ echo "make up needs DATABASE_URL, REDIS_URL, RACKPILOT_SECRET_KEY and RACKPILOT_SECRETS_KEY (see docs/configuration.md)"; exit 2; }
	mkdir -p var
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py load_demo
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	$(BIN)/python manage.py load_demo_workloads
	$(BIN)/python manage.py load_demo_slos
	trap 'kill 0' INT TERM EXIT; \
	$(BIN)/celery -A portal worker -Q jobs --hostname jobs@%h --loglevel INFO --concurrency 2 --without-gossip --without-mingle --without-heartbeat & \
	$(BIN)/celery -A portal worker -Q system --hostname system@%h --loglevel INFO --concurrency 1 --without-gossip --without-mingle --without-heartbeat & \
	$(BIN)/celery -A portal beat --loglevel INFO --schedule var/celerybeat-schedule & \
	$(BIN)/python manage.py serve_sim_exporters & \
	if command -v prometheus >/dev/null; then \
	  mkdir -p var/prometheus && cp docker/prometheus.yml var/prometheus/prometheus.yml && \
	  prometheus --config.file=var/prometheus/prometheus.yml --storage.tsdb.path=var/prometheus/data \
	    --storage.tsdb.retention.time=35d --web.listen-address=127.0.0.1:9090 --web.enable-lifecycle \
	    --log.level=warn & \
	  export RACKPILOT_PROMETHEUS_URL=$${RACKPILOT_PROMETHEUS_URL:-http://127.0.0.1:9090}; \
	else echo "prometheus not installed: telemetry pages read the simulator directly"; fi; \
	$(BIN)/uvicorn portal.asgi:application --host 127.0.0.1 --port $(PORT) --ws-per-message-deflate false & \
	wait

bench: install
	$(BIN)/python bench/api_nodes.py
	$(BIN)/python bench/topology.py
	$(BIN)/python bench/fanout.py
	$(BIN)/python bench/events.py
	$(BIN)/python bench/deploy.py
	$(BIN)/python bench/discover.py
	$(BIN)/python bench/benchmarks.py
	$(BIN)/python bench/node_suites.py
	$(BIN)/python bench/pages.py
	$(BIN)/python bench/diagnosis.py
	$(BIN)/python bench/telemetry.py
	@if [ -n "$$DATABASE_URL" -a -n "$$REDIS_URL" ]; then $(BIN)/python bench/scaleout.py; \
	else echo "bench/scaleout.py skipped: it needs DATABASE_URL (PostgreSQL) and REDIS_URL"; fi
	@if [ -n "$$DATABASE_URL" ] && command -v redis-server >/dev/null; then $(BIN)/python bench/chaos.py; \
	else echo "bench/chaos.py skipped: it needs DATABASE_URL (PostgreSQL) and redis-server (it restarts its own)"; fi

clean:
	rm -rf $(VENV) var
