# amqpscope: `make demo` and `make test` do all set-up on a fresh Debian machine (as root, or with sudo).
PYTHON  ?= python3
PIP     ?= $(PYTHON) -m pip
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := tshark tcpdump rabbitmq-server tmux
DEMO_CAPTURE ?= captures/091-ack-nack-reject.pcap
export DEBIAN_FRONTEND := noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test install system-deps broker lint unit captures bench compiled clean

demo: install
	@echo "== amqpscope read $(DEMO_CAPTURE)"
	@amqpscope read $(DEMO_CAPTURE)

test: install system-deps broker lint
	$(PYTHON) -m pytest -q

install:
	$(PIP) install -q -e '.[dev,spark,connect]'

system-deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | $(SUDO) debconf-set-selections; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

broker: system-deps
	$(PYTHON) captures/record.py --ensure-broker

lint:
	ruff check amqpscope pyspark_amqpscope tests tools captures bench
	ruff format --check amqpscope pyspark_amqpscope tests tools captures bench
	mypy
	@if [ -d ../shared/spec ]; then $(PYTHON) tools/gen_spec.py ../shared/spec --check; fi

unit:
	$(PYTHON) -m pytest -q -m "not broker"

captures: install system-deps
	$(PYTHON) captures/record.py

bench: install system-deps
	$(PYTHON) bench/run.py

# the hot path compiled with mypyc, in build/compiled (the editable install stays pure Python)
compiled: install
	$(PYTHON) tools/compiled.py

clean:
	rm -rf build dist .pytest_cache .ruff_cache bench/out *.egg-info
