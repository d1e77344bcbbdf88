# Two commands on a fresh machine:  `make demo`  and  `make test`  (see README.md).
# Both create .venv if it is missing. No GPU and no network beyond PyPI are needed.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.grpo-recipes-installed
PYTHON  ?= python3
# Where torch comes from on a machine without a GPU. Empty: PyPI, whose Linux wheel is the CUDA build (with the
# nvidia-* packages, several GB). The CPU build: make TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=

.PHONY: demo test install snapshot bench clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# GPU users bring their own CUDA torch; a machine without an NVIDIA GPU gets torch from TORCH_INDEX.
	if ! command -v nvidia-smi >/dev/null 2>&1 && ! $(PY) -c 'import torch' 2>/dev/null; then \
	  $(PY) -m pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); fi
	DS_BUILD_OPS=0 $(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)
	@echo "installed grpo-guard, grpo-recipes and grpo-data in $(VENV)/bin; to put them on PATH: source $(VENV)/bin/activate"

# The main job on embedded defaults, offline: list the recipes, show one recipe's guard plan on its
# hardware, then prepare and length-filter the bundled GSM8K sample with the bundled Qwen2.5 tokenizer.
demo: $(STAMP)
	$(VENV)/bin/grpo-recipes ls
	$(VENV)/bin/grpo-recipes plan qwen2.5-7b-instruct/lora-2xa100-40g
	mkdir -p output/demo
	$(VENV)/bin/grpo-data prepare-gsm8k data_tools/sample/gsm8k_train_300.jsonl -o output/demo/gsm8k.jsonl
	$(VENV)/bin/grpo-data stats output/demo/gsm8k.jsonl --coverage 0.999 --max-completion-length 1024
	$(VENV)/bin/grpo-data filter output/demo/gsm8k.jsonl -o output/demo/gsm8k.filtered.jsonl --max-length 256
	@echo "the commands are in $(VENV)/bin; to put them on PATH: source $(VENV)/bin/activate"

# The documentation site first (seconds; --strict: a broken link or include fails), then the suite on PYTEST_WORKERS
# processes (pytest-xdist; 0 runs it in this process) with its slowest tests listed.
PYTEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir site
	$(PY) -m pytest -q --durations=15 -n $(PYTEST_WORKERS)

snapshot: $(STAMP)
	$(PY) scripts/gen_swift_snapshot.py

bench: $(STAMP)
	$(PY) bench/bench_guard.py
	$(PY) bench/bench_data.py

clean:
	rm -rf $(VENV) build site *.egg-info
