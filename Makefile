# Two commands do all set-up on a fresh machine:
#   make book   build the website into _build/html
#   make test   run every check the project has
# Both create the virtual environment .venv/ from requirements.txt first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Notebooks in reading order, as listed in _toc.yml.
NOTEBOOKS = $(shell $(BIN)/python scripts/toc_notebooks.py)
# Those that train models: their numbers change on another machine.  The
# lab's notebooks are left out of the second machine's run (they run
# once, in `make nbval`): they would train four more models and keep
# the whole of `make test` over 45 minutes from an empty model cache.
TRAINED_NOTEBOOKS = $(filter-out chapters/lab-%,\
	$(shell $(BIN)/python scripts/toc_notebooks.py --trains))
# `make nbval-other-machine` trains every model from its seed + this.
SEED_OFFSET ?= 1
NBVAL = $(BIN)/python -m pytest -q -p no:cacheprovider --nbval-lax \
	-p tests.nbval_output_timeout \
	--nbval-current-env --nbval-cell-timeout=600 \
	--nbval-sanitize-with tests/nbval_sanitize.cfg -o addopts=""
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all book test unit lint notebooks nbval nbval-other-machine \
        execute browser lab models archive \
        benchmark benchmark-seq2seq benchmark-quality benchmark-robustness \
        benchmark-packed-gru benchmark-step-time benchmark-seeds \
        benchmark-vision-seeds benchmark-pretraining \
        benchmark-transformer-cache benchmark-transformer-tuning \
        benchmark-profile benchmark-speedups benchmark-transformer-step \
        benchmark-beam-search benchmark-ddp benchmark-gpu vendor \
        chromium clean distclean

all: book

# The environment is rebuilt when requirements.txt or pyproject.toml change.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 \
	    --display-name "Python 3 (d2lmini)" >/dev/null
	touch $@

venv: $(STAMP)

# MathJax, served from the site itself (`npm pack` of its tarball into
# the git-ignored assets/vendor/).
assets/vendor/.complete: scripts/vendor_js.sh
	@command -v npm >/dev/null || \
	    ($(SUDO) apt-get update -qq && \
	     $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	         apt-get install -y -qq npm >/dev/null)
	bash scripts/vendor_js.sh

vendor: assets/vendor/.complete

# The trained models that the website's translators run in the page,
# exported from the checkpoint cache into the git-ignored assets/models/
# (trained first if the cache lacks them; needs the corpus).
models: $(STAMP)
	$(BIN)/python scripts/export_models.py

# The chapter as one archive a website reader can run (the notebooks,
# the d2lmini wheel, pinned requirements, a README), into the
# git-ignored assets/archive/; the opener links it.
archive: $(STAMP)
	$(BIN)/python scripts/build_archive.py

# A clean build every time: Sphinx re-reads only changed files, so an
# incremental build would not repeat the warnings of unchanged ones.
book: $(STAMP) assets/vendor/.complete models archive
	rm -rf _build/html _build/.doctrees
	$(BIN)/jupyter-book build -W -n --keep-going .
	@echo
	@echo "The website is in _build/html: open _build/html/index.html"

# Unit tests: what a plain `pytest` runs (under a minute) and the few
# slower ones it leaves out (marked `slow`: a Node run over every code
# point, a notebook executed, the whole corpus read twice).  A few run
# the page's script in chromium (a plain `pytest` skips them without it).
unit: $(STAMP) chromium
	$(BIN)/python -m pytest -q -m "slow or not slow"

lint: $(STAMP)
	$(BIN)/ruff check .

# Run every notebook of the book in a fresh kernel and compare the cells
# tagged nbval-check-output with their committed outputs.
# (With no notebook in _toc.yml yet, pytest would fall back to tests/.)
nbval: $(STAMP)
	@if [ -z "$(strip $(NOTEBOOKS))" ]; then \
	    echo "nbval: no notebooks in _toc.yml"; \
	else \
	    $(NBVAL) $(NOTEBOOKS); \
	fi

# The notebooks that train, run again as a reader's machine runs them:
# other weights from the same code (D2LMINI_SEED_OFFSET moves every
# model's initial weights and batch order; the split stays).  Every cell
# must still run and every compared output hold.  The models are cached
# under their own keys, beside the chapter's.
nbval-other-machine: $(STAMP)
	D2LMINI_SEED_OFFSET=$(SEED_OFFSET) $(NBVAL) $(TRAINED_NOTEBOOKS)

# The committed notebooks have complete, fresh outputs (seconds; part of
# `make unit` too).
notebooks: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_notebooks.py

# Re-execute every notebook in place with stable, reviewable outputs.
execute: $(STAMP)
	$(BIN)/python scripts/execute_notebooks.py $(NOTEBOOKS)

# Debian's chromium drives the website check (Playwright's own browser
# download does not work offline).
chromium:
	@command -v chromium >/dev/null || \
	    ($(SUDO) apt-get update -qq && \
	     $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	         apt-get install -y -qq chromium >/dev/null)

# Serve _build/html on 127.0.0.1 and check every page in headless chromium
# (needs `make book` first); screenshots go to _build/screenshots/.
browser: $(STAMP) chromium
	$(BIN)/python -m pytest -q -p no:cacheprovider -o addopts="" -m book \
	    tests/test_book_html.py tests/test_site_live.py

test: lint unit nbval nbval-other-machine book browser
	@echo "All checks passed."

lab: $(STAMP)
	$(BIN)/jupyter lab chapters/

benchmark: $(STAMP)
	$(BIN)/python benchmarks/attention.py

# Held-out BLEU of the book's recipe and the chapter's (about 4 minutes
# on 2 CPU cores; needs the corpus, e.g. D2LMINI_DATA_DIR=../shared/data).
benchmark-quality: $(STAMP)
	$(BIN)/python benchmarks/translation_quality.py

# Does the chapter's recipe train each of its decoders at two length
# ranges and two step counts, over 3 seeds (and splits)?  (72 runs of 6
# decoders, about two and a half hours on 2 CPU cores; the models go
# through the checkpoint cache; --settings and --kinds pick a part, and
# the docstring of benchmarks/robustness.py gives the committed runs.)
benchmark-robustness: $(STAMP)
	$(BIN)/python benchmarks/robustness.py $(ARGS)

# Training time per step and throughput of the chapter's models, as
# ratios (about 3 minutes; the Bahdanau and Transformer sections time
# their own equal-time runs where they run, with d2lmini.timing).
benchmark-step-time: $(STAMP)
	$(BIN)/python benchmarks/step_time.py $(ARGS)

# The chapter's comparisons over seeds 0, 1 and 2 (about 35 minutes; the
# models go through the checkpoint cache); writes benchmarks/results/.
benchmark-seeds: $(STAMP)
	$(BIN)/python benchmarks/seeds.py $(ARGS)

# The vision section's ViT against softmax regression, an MLP and a CNN
# at equal time, and its 4 x 4 patches, over three seeds (about 5 min).
benchmark-vision-seeds: $(STAMP)
	$(BIN)/python benchmarks/vision_seeds.py $(ARGS)

# The pretraining section's language model, decoding settings and
# pretrained against scratch translators, over three seeds (~20 min).
benchmark-pretraining: $(STAMP)
	$(BIN)/python benchmarks/pretraining.py $(ARGS)

# The language model trained as one process and as two torchrun
# processes on this machine's CPU: tokens per second and the largest
# weight gap between them (about 2 minutes); writes
# benchmarks/results/ddp.json.
benchmark-ddp: $(STAMP)
	$(BIN)/python benchmarks/ddp.py $(ARGS)

# On a machine with a CUDA GPU: the CUDA tests, the Transformer's and the
# language model's recipes trained there, steps per second and decoding
# throughput against the CPU, host syncs per step (at most 8 minutes);
# writes benchmarks/results/gpu.json.  ARGS=--quick checks that it runs
# (on the CPU when there is no GPU, writing nothing).
benchmark-gpu: $(STAMP)
	$(BIN)/python benchmarks/gpu.py $(ARGS)

# The Transformer decoder's greedy decoding with and without its
# key/value cache (seconds).
benchmark-transformer-cache: $(STAMP)
	$(BIN)/python benchmarks/transformer_cache.py $(ARGS)

# How TRANSFORMER_RECIPE's learning rate and dropout were chosen: six
# runs scored on the val split (about 8 minutes; needs the corpus);
# writes benchmarks/results/transformer_tuning.json.
benchmark-transformer-tuning: $(STAMP)
	$(BIN)/python benchmarks/transformer_tuning.py $(ARGS)

# The hand-written packed GRU path against nn.GRU on a PackedSequence.
benchmark-packed-gru: $(STAMP)
	$(BIN)/python benchmarks/packed_gru.py $(ARGS)

# Training speed against d2l 1.0.3 (minutes; pass ARGS=--quick to check that
# it runs).  d2l is installed without its dependencies into the git-ignored
# _build/bench-deps/, for this benchmark only.
benchmark-seq2seq: $(STAMP)
	@test -f _build/bench-deps/d2l/torch.py || \
	    $(BIN)/python -m pip install --quiet --no-deps \
	        --target _build/bench-deps d2l==1.0.3
	$(BIN)/python benchmarks/seq2seq.py $(ARGS)

# Where a training step's time goes, part by part, for the chapter's
# models and the book's setting with d2lmini and d2l 1.0.3, and each
# step's floor, its matrix products at the machine's best rate (about 4
# minutes; installs d2l as benchmark-seq2seq does); writes
# benchmarks/results/profile.json.
benchmark-profile: $(STAMP)
	@test -f _build/bench-deps/d2l/torch.py || \
	    $(BIN)/python -m pip install --quiet --no-deps \
	        --target _build/bench-deps d2l==1.0.3
	$(BIN)/python benchmarks/profile_step.py $(ARGS)

# Speed changes measured against d2lmini's own code, side by side
# (about a minute).
benchmark-speedups: $(STAMP)
	$(BIN)/python benchmarks/speedups.py $(ARGS)

# The Transformer's training step against the same model built from
# nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (a minute).
benchmark-transformer-step: $(STAMP)
	$(BIN)/python benchmarks/transformer_step.py $(ARGS)

# Beam search against greedy decoding on the test split, over three
# training seeds (the length penalty chosen on the val split; about 12
# minutes with the models of offsets 0 and 1 cached, 5 of them training
# the third seed's two models; 22 from an empty cache); writes
# benchmarks/results/beam_search.json, which the decoding section quotes.
benchmark-beam-search: $(STAMP)
	$(BIN)/python benchmarks/beam_search.py $(ARGS)

clean:
	rm -rf _build

distclean: clean
	rm -rf $(VENV) assets/vendor assets/archive
