# make run   — execute every notebook on the GPU, stamp it, print the headline numbers
# make test  — unit tests, notebook checks, and nbval over notebooks/ (GPU parts skip without a GPU)
# make lab   — open JupyterLab on notebooks/
# make wheelhouse PY=3.12 — download every wheel for an offline (air-gapped) GPU runner
PYTHON ?= python3
VENV   ?= .venv
PY     ?= 3.12
# The torch requirement installed first; CI pins the CPU build (TORCH=torch==2.13.0).
TORCH  ?= torch>=2.4
BIN    := $(VENV)/bin
OFFLINE := $(if $(wildcard wheelhouse/*.whl),--no-index --find-links wheelhouse,)

.PHONY: run test lab wheelhouse clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python requirements.txt requirements-test.txt pyproject.toml
	$(BIN)/python -m pip install -q $(OFFLINE) "$(TORCH)"
	$(BIN)/python -m pip install -q $(OFFLINE) -e ".[test]"
	touch $@

run: $(VENV)/.installed
	$(BIN)/python -m helpers.execute

test: $(VENV)/.installed
	$(BIN)/python -m pytest

lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/

wheelhouse:
	$(PYTHON) -m pip download -d wheelhouse --only-binary=:all: --python-version $(PY) \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  "$(TORCH)" -r requirements.txt -r requirements-test.txt pip setuptools wheel
	@echo "wheelhouse/ ready: copy it with the checkout; make run/test install from it offline."

clean:
	rm -rf $(VENV)
