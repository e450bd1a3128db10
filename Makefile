# spamnb developer tasks.  `make demo` and `make test` build the venv when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SAMPLE := corpora/sample/maildir
DEMO_MODEL := build/demo/model.joblib

.PHONY: install demo test lint format bench bench-accuracy clean fuzz

install: $(STAMP)

# Reinstall when the package's metadata changes; the package itself is editable.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p $(dir $(DEMO_MODEL))
	$(BIN)/spamnb train --new -m $(DEMO_MODEL) --spam $(SAMPLE)/spam --ham $(SAMPLE)/ham
	$(BIN)/spamnb evaluate --spam $(SAMPLE)/spam --ham $(SAMPLE)/ham --test-size 0.3 --seed 1
	$(BIN)/spamnb top-odds -m $(DEMO_MODEL) -n 10
	$(BIN)/spamnb classify -m $(DEMO_MODEL) $(SAMPLE)/spam/new $(SAMPLE)/ham/new

test: $(STAMP)
	$(BIN)/pytest

# Speed and memory against bogofilter and scikit-learn, measured in the same run on the
# same split (train time, classify rate, pipe latency, peak RSS as ratios spamnb/peer;
# installs the peers itself; a few minutes; see bench/speed.py and docs/benchmarks.md).
bench: $(STAMP)
	$(BIN)/python bench/speed.py

# Training time and peak RSS at 25k, 50k and 100k generated messages (about 10 minutes,
# 0.6 GB of temporary files; see bench/scale.py and docs/benchmarks.md).
.PHONY: bench-scale
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py

# Accuracy against bogofilter, CRM114, SpamAssassin Bayes and scikit-learn on the same
# splits of the public corpora (installs the peers from Debian's packages; see bench/).
bench-accuracy: $(STAMP)
	$(BIN)/python bench/accuracy.py

# The same on six splits (seeds 0 to 5) and each filter's totals over them: one split's
# errors move by several from draw to draw.  SpamAssassin's Bayes, the slowest peer, is
# left out (about 10 minutes).
.PHONY: bench-accuracy-splits
bench-accuracy-splits: $(STAMP)
	$(BIN)/python bench/accuracy.py --seeds 0-5 --filters spamnb,bogofilter,crm114,sklearn \
		--output build/bench-accuracy/splits.json

# Mutation fuzzing: damaged corpus messages through the tokenizer, the pipe filter and the
# header readers; failing and slowest inputs land in build/fuzz/ (see docs/reliability.md).
FUZZ_SECONDS ?= 600
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz.py --seconds $(FUZZ_SECONDS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .hypothesis
