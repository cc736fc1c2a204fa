# Thin wrappers over `python -m bench`. Both `make bench` and `make test` set themselves up first.
#   make bench [GPUS=2] [NODES=1] [VARIANTS=all] [TASK=default] [MODELS=a,b,...] [TUNE=MINUTES [TUNE_BATCH=1] [TUNE_COMPILE=1]] [ARGS=...]
#   make test        the whole suite (what CI runs), on two pytest workers
#   make test-fast   the tests that start no training run, on two pytest workers: the edit loop
#   SETUP=none: use the current Python environment as it is (a GPU box with torch preinstalled;
#   DTBENCH_TF_PYTHON=/path/to/python names a TensorFlow GPU interpreter of your own).
#   On a GPU box (nvidia-smi lists one) setup also makes .venv-tf with TensorFlow's GPU build.
SHELL := /bin/bash
SETUP ?= venv
PYTHON ?= python3
VENV := .venv
# What `make bench` (and reference, regress, overhead) installs: the default sweep's approaches and the quick task's
# digits. The tests' setup adds the engines, S3, MLflow and the test tools; `bench` names the extra an option lacks.
BENCH_EXTRAS ?= torch,tf,jax,accelerate,deepspeed,lightning,data
EXTRAS ?= $(BENCH_EXTRAS),s3,ray,spark,dask,mlflow,test
# Exact versions of everything installed, transitive included (`make lock` remakes it from the venv): a pip
# constraints file rather than uv.lock, because pip alone reads it, within pyproject.toml's ranges, and it
# installs nothing by itself (an extra not asked for stays out).
LOCK := constraints.txt
GPUS ?= 2
NODES ?= 1
VARIANTS ?= all
TASK ?= default
REPEATS ?= 1
MODELS ?=
OUT ?= results/latest
ARGS ?=

ifeq ($(SETUP),none)
PY := $(PYTHON)
else
PY := $(VENV)/bin/python
endif
SUM := $(shell cat pyproject.toml $(LOCK) | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-all-$(SUM)
BENCH_STAMP := $(VENV)/.installed-bench-$(SUM)
TF_VENV := .venv-tf
TF_STAMP := $(TF_VENV)/.installed-$(SUM)
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)

.PHONY: setup setup-bench packages bench-packages data test-tools bench test test-fast report reference benchmark \
	regress overhead gpu-check lock clean

# Everything (the tests'); setup-bench: what `make bench` needs.
setup: packages data
setup-bench: bench-packages data

ifeq ($(SETUP),none)
packages bench-packages:
	@$(PY) -c "import numpy, pandas" || { echo "SETUP=none: this Python lacks numpy/pandas; drop SETUP=none to make a venv"; exit 2; }
else
packages: $(STAMP) $(if $(HAS_GPU),$(TF_STAMP))
bench-packages: $(BENCH_STAMP) $(if $(HAS_GPU),$(TF_STAMP))

$(STAMP) $(BENCH_STAMP): pyproject.toml $(LOCK)
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@# A venv made before the tf extra took the full tensorflow wheel: both wheels would own tensorflow/.
	@! $(VENV)/bin/python -m pip show -q tensorflow-cpu 2>/dev/null || $(VENV)/bin/python -m pip uninstall -q -y tensorflow-cpu
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -c $(LOCK) \
		-e ".[$(if $(filter $(STAMP),$@),$(EXTRAS),$(BENCH_EXTRAS))]"
	@rm -f $(VENV)/.installed-* && touch $@ $(BENCH_STAMP)

# A GPU box: TensorFlow's GPU build in a venv of its own (its CUDA-12 cuDNN/NCCL wheels overwrite torch's CUDA-13
# ones in a shared venv; bench/run/interpreters.py); the harness starts TF variants with it. Not held to the lock,
# which is the CPU venv's.
$(TF_STAMP): pyproject.toml $(LOCK)
	@test -x $(TF_VENV)/bin/python || $(PYTHON) -m venv $(TF_VENV)
	$(TF_VENV)/bin/python -m pip install -q --disable-pip-version-check -e ".[tf-gpu]"
	@rm -f $(TF_VENV)/.installed-* && touch $@
endif

# Installs Debian's dataset-fashion-mnist when missing, then fills the dataset cache.
data:
	@$(PY) -m bench data quick default --install

# For the tests only (make bench needs neither): Debian's Chromium, which the HTML report's browser test drives
# through Playwright (never a browser build of its own), and Slurm with munge, which tests/test_slurm.py runs
# as a two-node cluster. Installed here when missing and apt runs as root; elsewhere a warning, and those
# tests skip saying why.
TEST_TOOLS := /usr/bin/chromium:chromium /usr/sbin/slurmctld:slurmctld /usr/sbin/slurmd:slurmd \
	/usr/bin/sbatch:slurm-client /usr/sbin/munged:munge
test-tools:
	@missing="$$(for t in $(TEST_TOOLS); do test -x $${t%%:*} || echo $${t#*:}; done | xargs)"; \
	test -z "$$missing" || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null 2>&1 \
	    || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null 2>&1; } \
	    || echo "warning: apt-get could not install $$missing: the tests that need them will skip"; \
	  else echo "warning: $$missing missing and apt-get needs root: the tests that need them will skip"; fi; }

bench: setup-bench
	$(PY) -m bench sweep --max-devices $(GPUS) --nodes $(NODES) --variants $(VARIANTS) --task $(TASK) --repeats $(REPEATS) $(if $(MODELS),--models $(MODELS)) $(if $(TUNE),--tune $(TUNE)) $(if $(TUNE_BATCH),--tune-batch) $(if $(TUNE_COMPILE),--tune-compile) --out $(OUT) $(ARGS)

# Two workers, each test file on one (its module fixtures run once), the longest files first (tests/conftest.py):
# most of a test's time is process start-up, rendezvous and timeouts, not both cores. No test asserts an absolute
# time; the timeouts tests wait on leave room for a machine running two at once. TEST_WORKERS=0 runs them one by one.
TEST_WORKERS ?= 2
# Bytecode written: an environment that forbids it (many container images do) makes every worker compile and
# rewrite the tests anew, seconds each time.
test test-fast: export PYTHONDONTWRITEBYTECODE =
test: setup test-tools
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(ARGS)

# Two workers: these tests start no training run, so they share the cores without timing anything. A worker whose
# queue is empty takes tests from the other's (worksteal), rather than idling while the other finishes its share.
# The generated input tries a third of the examples `make test` does (Hypothesis's usual split of a dev and a CI
# profile).
test-fast: export DTBENCH_GENERATED_EXAMPLES ?= 20
test-fast: setup test-tools
	$(PY) -m pytest -m "not slow" -n 2 --dist worksteal $(ARGS)

report:
	$(PY) -m bench report $(OUT)

# The committed reference report of this machine: the default sweep into results/reference-<device>.
REFERENCE ?= results/reference-cpu
# The sweep writes into a new folder and replaces the committed one only at the end: deleting a tracked
# folder first made every row's commit say -dirty. A sweep that finished with failed runs (exit 1, its report
# written last) still replaces it, its failures in the report; a refused, interrupted or aborted one (2, 130,
# or 1 without a report) leaves the old one and $(REFERENCE).new.
reference: setup-bench
	rm -rf $(REFERENCE).new
	$(PY) -m bench sweep --max-devices $(GPUS) --nodes $(NODES) --variants $(VARIANTS) --task $(TASK) --repeats $(REPEATS) --out $(REFERENCE).new $(ARGS); \
	status=$$?; \
	if [ $$status -le 1 ] && [ -f $(REFERENCE).new/report.md ]; then rm -rf $(REFERENCE).new/runs $(REFERENCE).new/audit/runs $(REFERENCE) && mv $(REFERENCE).new $(REFERENCE); fi; \
	exit $$status

# pytest-benchmark: per-step training functions, one framework per process; kept out of `make test`.
benchmark: setup
	$(PY) -m pytest benchmarks/test_torch_step.py --benchmark-only $(ARGS)
	$(PY) -m pytest benchmarks/test_tf_step.py --benchmark-only $(ARGS)

# Did the current tree slow training down against AGAINST (default origin/main)?
AGAINST ?= origin/main
regress: setup-bench
	$(PY) -m bench regress --against $(AGAINST) $(ARGS)

overhead: setup-bench
	$(PY) -m bench overhead --task $(TASK) $(ARGS)

# The one-GPU check of a lent GPU machine (bench.studies.gpu_check), within ~8 minutes: `make gpu-check SETUP=none`.
# Every run is on synthetic input, so it needs the packages but no dataset. Without a GPU it says so in one line
# (exit 2); ARGS=--dry-run prints every run it would make, with its time estimate, on any machine.
gpu-check: packages
	@$(PY) -m bench gpu-check $(ARGS)

# The lock from the venv as it is (after `make setup`): every package's exact version, dtbench itself left out.
lock:
	{ sed -n '1,3p' $(LOCK); $(VENV)/bin/python -m pip freeze --exclude-editable --disable-pip-version-check; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)

clean:
	rm -rf $(VENV) $(TF_VENV) .cache results/latest
