# make run   — execute every notebook on the GPU, stamp it, print the headline numbers
# make test  — unit tests, notebook checks, and nbval over notebooks/ (GPU parts skip without a GPU)
# make lab   — open JupyterLab on notebooks/
# make wheelhouse PY=3.12 — download every wheel for an offline (air-gapped) GPU runner
# make fork REPO=OWNER/NAME — point the Colab badges, setup cells and pyproject.toml at your fork
# make student OUT=handout — the notebooks for learners: outputs cleared, solution cells left out
PYTHON ?= python3
VENV   ?= .venv
PY     ?= 3.12
# The torch requirement installed first; CI pins the CPU build (TORCH=torch==2.13.0).
TORCH  ?= torch>=2.4
# A GPU machine whose $(PYTHON) already has a CUDA build of torch (a GPU CI runner, an NGC container, an
# offline box) keeps it: the venv sees the system packages and torch is not downloaded again.
# Auto-detected; force with SYSTEM_TORCH=1 or SYSTEM_TORCH=0.
ifndef SYSTEM_TORCH
SYSTEM_TORCH := $(shell $(PYTHON) -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)" >/dev/null 2>&1 && echo 1 || echo 0)
endif
BIN    := $(VENV)/bin
OFFLINE := $(if $(wildcard wheelhouse/*.whl),--no-index --find-links wheelhouse,)
VENV_FLAGS := $(if $(filter 1,$(SYSTEM_TORCH)),--system-site-packages,)

.PHONY: run test lab wheelhouse fork student clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)

$(VENV)/.installed: $(BIN)/python requirements.txt requirements-test.txt pyproject.toml
ifeq ($(SYSTEM_TORCH),1)
	@echo "keeping the CUDA torch of $(PYTHON) (SYSTEM_TORCH=1)"
else
	$(BIN)/python -m pip install -q $(OFFLINE) "$(TORCH)"
endif
	$(BIN)/python -m pip install -q $(OFFLINE) -e ".[test]"
	touch $@

run: $(VENV)/.installed
	$(BIN)/python -m tools.execute

test: $(VENV)/.installed
	$(BIN)/python -m pytest

lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/

wheelhouse:
	$(PYTHON) -m pip download -d wheelhouse --only-binary=:all: --python-version $(PY) \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  $(if $(filter 1,$(SYSTEM_TORCH)),,"$(TORCH)") -r requirements.txt -r requirements-test.txt pip setuptools wheel
	@echo "wheelhouse/ ready: copy it with the checkout; make run/test install from it offline."

fork: $(VENV)/.installed
	@test -n "$(REPO)" || { echo "usage: make fork REPO=OWNER/NAME"; exit 2; }
	$(BIN)/python -m tools.notebooks set-repo $(REPO)

OUT ?= handout
student: $(VENV)/.installed
	$(BIN)/python -m tools.student $(OUT)

clean:
	rm -rf $(VENV)
