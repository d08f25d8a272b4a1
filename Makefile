# make run   — execute every notebook on the GPU, stamp it, print the headline numbers
# make test  — unit tests, notebook checks, and nbval over notebooks/ (GPU parts skip without a GPU)
# make lab   — open JupyterLab on notebooks/
# make wheelhouse PY=3.12 — download every wheel for an offline (air-gapped) GPU runner
# make fork REPO=OWNER/NAME — point the Colab badges, setup cells and pyproject.toml at your fork
# make student OUT=handout — the notebooks for learners: outputs cleared, solution cells left out
# make handout-branch [BRANCH=student] — commit that hand-out onto a branch Colab opens (prints the git push)
# make site  — the course website from the committed notebooks (nothing executed) into build/site/html
#
# Settings a venv is built with (recorded in $(VENV)/.installed, see below):
#   TORCH=spec      the torch requirement installed first; CI pins the CPU build (TORCH=torch==2.13.0)
#   CPU=1           torch from torch's CPU wheel index instead of PyPI's CUDA build
#   LEAN=1          the frontend without its CuTe-DSL engines (nvidia-cutlass-dsl, apache-tvm-ffi)
#   SYSTEM_TORCH=1  keep the CUDA torch of $(PYTHON) (auto-detected)
#   LATEST=1        the newest torch, cuDNN and frontend; by default a GPU machine gets the stored run's
#                   versions (constraints.txt, which tools.execute writes from the run it stamps)
# Not recorded: CUDA_TORCH=1 takes PyPI's CUDA build on a machine without an NVIDIA driver, where otherwise the CPU
# build is taken (a wheel at hand, or torch's CPU index) or make stops in one line (tools/torch_build.py);
# CPU_INDEX=URL, a CPU wheel index other than torch's.
PYTHON ?= python3
VENV   ?= .venv
PY     ?= 3.12
TORCH_DEFAULT := torch>=2.4
TORCH  ?= $(TORCH_DEFAULT)
CPU    ?= 0
LEAN   ?= 0
LATEST ?= 0
PINS   := constraints.txt
PYTEST_ARGS ?=
WHEELHOUSE  ?= wheelhouse
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
STAMP  := $(VENV)/.installed
GOALS  := $(or $(MAKECMDGOALS),run)
CPU_INDEX ?=
CUDA_TORCH ?= 0
flag    = $(if $(filter 1,$(1)),1,0)

# requirements.txt as words, one requirement each (no spaces inside one): torch, the frontend, the rest.
REQS  := $(shell sed 's/[[:space:]]*\#.*//' requirements.txt)
named  = $(filter $(1) $(foreach op,< > = ! ~ [,$(1)$(op)%),$(REQS))
quoted = $(foreach r,$(1),"$(r)")
FRONTEND_REQ := $(call named,nvidia-cudnn-frontend)
REST_REQS    := $(filter-out $(call named,torch) $(FRONTEND_REQ),$(REQS))
# What LEAN=1 adds: the frontend's device queries import cuda.bindings (CUDA torch wheels bring it).
LEAN_EXTRAS  := cuda-bindings

# The venv remembers its settings. A target that uses it takes each setting this call does not give
# from the stamp; run/test/lab stop when a given one differs (make clean first). The wheelhouse does not.
SETTINGS := TORCH SYSTEM_TORCH CPU LEAN LATEST
setting   = $(if $(filter TORCH,$(1)),$(TORCH),$(call flag,$($(1))))
given     = $(filter command environment,$(origin $(1)))
ifneq ($(filter-out clean wheelhouse,$(GOALS)),)
ifeq ($(filter clean,$(GOALS)),)
$(foreach s,$(SETTINGS),$(eval RECORDED_$(s) := $(shell sed -n 's/^$(s)=//p' $(STAMP) 2>/dev/null)))
$(foreach s,$(SETTINGS),$(if $(RECORDED_$(s)),$(if $(call given,$(s)),,$(eval $(s) := $(RECORDED_$(s))))))
endif
endif

# A GPU machine whose $(PYTHON) already has a CUDA build of torch (a GPU CI runner, an NGC container, an
# offline box) keeps it: the venv sees the system packages and torch is not downloaded again.
# Auto-detected; force with SYSTEM_TORCH=1 or SYSTEM_TORCH=0.
ifndef SYSTEM_TORCH
SYSTEM_TORCH := $(shell $(PYTHON) -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)" >/dev/null 2>&1 && echo 1 || echo 0)
endif
# An NVIDIA driver is there when nvidia-smi is on PATH or the kernel module is loaded; force with 0 or 1.
ifndef NVIDIA_DRIVER
NVIDIA_DRIVER := $(shell command -v nvidia-smi >/dev/null 2>&1 || test -e /proc/driver/nvidia && echo 1 || echo 0)
endif

# The stored run's versions as pip constraints, where this venv gets a CUDA torch of its own (a driver, or
# CUDA_TORCH=1) from the default TORCH; not with SYSTEM_TORCH=1 (that torch is kept: the setup cell names any
# difference), CPU=1, a TORCH of the caller's, or LATEST=1. The wheelhouse, made for a GPU runner, takes them too.
DEFAULT_TORCH := $(filter $(TORCH_DEFAULT),$(TORCH))
PINNED := $(and $(filter 1,$(NVIDIA_DRIVER) $(call flag,$(CUDA_TORCH))),$(filter 0,$(call flag,$(SYSTEM_TORCH))),\
  $(filter 0,$(call flag,$(CPU))),$(filter 0,$(call flag,$(LATEST))),$(DEFAULT_TORCH))
PIN_FLAGS := $(if $(PINNED),-c $(PINS))
WHEEL_PIN_FLAGS := $(if $(and $(filter 0,$(call flag,$(LATEST))),$(DEFAULT_TORCH)),-c $(PINS))

MISMATCH := $(strip $(foreach s,$(SETTINGS),$(if $(RECORDED_$(s)),$(if $(filter-out $(RECORDED_$(s)),$(call setting,$(s))),$(s)))))
ifneq ($(MISMATCH),)
ifneq ($(filter run test lab,$(GOALS)),)
$(error $(VENV) was built with $(foreach s,$(MISMATCH),$(s)=$(RECORDED_$(s))), this call asks for $(foreach s,$(MISMATCH),$(s)=$(call setting,$(s))): run 'make clean' first (or give another VENV))
endif
endif

# make run executes the notebooks on an NVIDIA GPU: without a driver it says so in one line, before installing anything.
ifneq ($(filter run,$(GOALS)),)
ifeq ($(NVIDIA_DRIVER),0)
$(error No NVIDIA driver found: 'make run' executes the notebooks on an NVIDIA GPU, so it installs nothing here; read them with their stored outputs on the course website or in Colab (README), or run the CPU checks with 'make test' (NVIDIA_DRIVER=1 overrides))
endif
endif

OFFLINE    := $(if $(wildcard $(WHEELHOUSE)/*.whl),--no-index --find-links $(WHEELHOUSE),)
VENV_FLAGS := $(if $(filter 1,$(SYSTEM_TORCH)),--system-site-packages,)
# Which torch, decided (and said, or stopped at, in one line) before anything is installed: tools/torch_build.py.
TORCH_FLAGS := $(if $(filter 1,$(CPU)),--cpu) $(if $(filter 1,$(NVIDIA_DRIVER)),--driver) \
  $(if $(filter 1,$(CUDA_TORCH)),--cuda-torch) $(if $(OFFLINE),--wheelhouse $(WHEELHOUSE)) \
  $(if $(CPU_INDEX),--cpu-index $(CPU_INDEX)) $(if $(PINNED),--constraint $(PINS))
TORCH_BUILD := $(PYTHON) -m tools.torch_build --python $(BIN)/python --torch "$(TORCH)" \
  --goal $(firstword $(GOALS)) $(strip $(TORCH_FLAGS))

.PHONY: run test lab wheelhouse fork student handout-branch site clean

# A venv this call created is removed again when torch's install stops or fails (it holds no more than pip then).
$(STAMP): requirements.txt requirements-test.txt pyproject.toml $(if $(PINNED),$(PINS))
	@test -x $(BIN)/python || { test -e $(VENV) || NEW=1; $(PYTHON) -m venv $(VENV_FLAGS) $(VENV) && \
	  { test -z "$$NEW" || touch $(VENV)/.new; }; }
ifeq ($(SYSTEM_TORCH),1)
	@echo "keeping the CUDA torch of $(PYTHON) (SYSTEM_TORCH=1)"
else
ifneq ($(PINNED),)
	@echo "installing the stored run's versions ($(shell grep -v '^#' $(PINS) | paste -sd' ')); LATEST=1 takes the newest"
endif
	@$(TORCH_BUILD) || { status=$$?; test ! -e $(VENV)/.new || rm -rf $(VENV); exit $$status; }
endif
	@rm -f $(VENV)/.new
ifeq ($(call flag,$(LEAN)),1)
	$(PIP) install -q $(OFFLINE) $(PIN_FLAGS) --no-deps $(call quoted,$(FRONTEND_REQ))
	$(PIP) install -q $(OFFLINE) $(PIN_FLAGS) $(call quoted,$(REST_REQS) $(LEAN_EXTRAS)) -r requirements-test.txt
	$(PIP) install -q $(OFFLINE) --no-deps -e .
else
	$(PIP) install -q $(OFFLINE) $(PIN_FLAGS) -e ".[test]"
endif
	printf '%s\n' $(foreach s,$(SETTINGS),'$(s)=$(call setting,$(s))') > $@

run: $(STAMP)
	$(BIN)/python -m tools.execute

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Jupyter refuses to start as root (containers, CI images) without --allow-root.
USER_ID ?= $(shell id -u)
lab: $(STAMP)
	$(BIN)/jupyter lab $(if $(filter 0,$(USER_ID)),--allow-root) notebooks/

# SYSTEM_TORCH=1 leaves torch (and so the CUDA wheels it pulls) out; LEAN=1 takes the frontend alone.
DOWNLOAD := $(PYTHON) -m pip download -d $(WHEELHOUSE) $(WHEEL_PIN_FLAGS) --only-binary=:all: --python-version $(PY) \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
wheelhouse:
ifeq ($(call flag,$(LEAN)),1)
	$(DOWNLOAD) --no-deps $(call quoted,$(FRONTEND_REQ))
endif
	$(DOWNLOAD) $(if $(filter 1,$(SYSTEM_TORCH)),,"$(TORCH)") \
	  $(call quoted,$(REST_REQS) $(if $(filter 1,$(LEAN)),$(LEAN_EXTRAS),$(FRONTEND_REQ))) \
	  -r requirements-test.txt pip setuptools wheel
	@echo "$(WHEELHOUSE)/ ready: copy it with the checkout; make run/test install from it offline."

fork: $(STAMP)
	@test -n "$(REPO)" || { echo "usage: make fork REPO=OWNER/NAME"; exit 2; }
	$(BIN)/python -m tools.cli set-repo $(REPO)

# The hand-out's badges open BRANCH and its setup cells clone it: publish it with handout-branch.
OUT ?= handout
BRANCH ?= student
student: $(STAMP)
	$(BIN)/python -m tools.student $(OUT) --branch $(BRANCH)

handout-branch: $(STAMP)
	$(BIN)/python -m tools.student --branch $(BRANCH)

# The website's packages go into the course's venv only when the site is built (make test does not need them).
SITE_STAMP := $(VENV)/.site-installed
$(SITE_STAMP): $(STAMP) requirements-site.txt
	$(PIP) install -q $(OFFLINE) -r requirements-site.txt
	touch $@

site: $(SITE_STAMP)
	$(BIN)/python -m tools.site

clean:
	rm -rf $(VENV)
