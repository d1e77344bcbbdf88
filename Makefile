# Two commands on a fresh machine:  `make demo`  and  `make test`  (see README.md).
# Both create .venv if it is missing. No GPU and no network beyond PyPI are needed.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.grpo-recipes-installed
PYTHON  ?= python3

.PHONY: demo test install snapshot bench clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# GPU users bring their own CUDA torch; a machine without an NVIDIA GPU gets the CPU build.
	if ! command -v nvidia-smi >/dev/null 2>&1 && ! $(PY) -c 'import torch' 2>/dev/null; then \
	  $(PY) -m pip install --quiet torch==2.13.0; fi
	DS_BUILD_OPS=0 $(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/grpo-guard validate recipes/examples/qwen2.5-7b-lora-colocate.yaml

test: $(STAMP)
	$(PY) -m pytest -q

snapshot: $(STAMP)
	$(PY) scripts/gen_swift_snapshot.py

bench: $(STAMP)
	$(PY) bench/bench_guard.py

clean:
	rm -rf $(VENV) build *.egg-info
