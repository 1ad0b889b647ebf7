# speclab: two commands on a fresh machine, `make book` and `make test`.
#
# The set-up pins the CPU build of torch (from PyTorch's CPU index when it answers, TORCH_INDEX below).
# On a machine with a GPU, install a CUDA build instead, e.g.
#     make setup TORCH_SPEC='torch>=2.3'
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
# PyTorch's own index of CPU wheels. On plain PyPI a Linux torch is a CUDA build of several GB, so the set-up
# adds this index when it answers (pip then prefers its 2.13.0+cpu); the course's machines reach only their own
# mirror, which holds the CPU build, and ask nothing else (no retries, no warnings). TORCH_INDEX= turns it off.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_INDEX_ARG = $(shell test -n '$(TORCH_INDEX)' && $(PYTHON) -c 'import urllib.request as u; u.urlopen("$(TORCH_INDEX)/torch/", timeout=5)' >/dev/null 2>&1 && echo '--extra-index-url $(TORCH_INDEX)')
# jsonschema from 4.24 imports rfc3987-syntax, which builds its IRI parsers at import: 1.5 s of CPU in every
# process that reads a notebook (nbformat imports jsonschema), and grading starts several per student
# (python-jsonschema/jsonschema#1428). The set-up keeps the release before it; requirements.txt stays open.
# Elsewhere the grader still marks the package absent in its own processes (autograder/inside/nbgrader_cmd.py).
SETUP_PINS := jsonschema<4.24
# pip's configured sources (`pip config list`: index, extra indexes, find-links, constraints), as uv's flags
define PIP_SOURCES_TO_UV
import ast, shlex, subprocess, sys
listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
flag = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
        "constraint": "--constraint"}
args = []
for line in listed.splitlines():
    key, _, value = line.partition("=")
    name = key.rsplit(".", 1)[-1]
    for item in ast.literal_eval(value).split() if name in flag else ():
        if [flag[name], item] not in [args[i:i + 2] for i in range(0, len(args), 2)]:
            args += [flag[name], item]
print(shlex.join(args))
endef
export PIP_SOURCES_TO_UV
STAMP := $(VENV)/.installed-$(shell echo '$(TORCH_SPEC) $(SETUP_PINS)' | md5sum | cut -c1-8)
JB_FLAGS := -W -n --keep-going

.PHONY: setup html pdf print-pdf book book-fresh test audit labs grade gradescope student-release clean help gpu-report gpu-wheels

help:
	@echo "make book        set up .venv, build the executed book into _build/html and, with Chromium, the PDF"
	@echo "make pdf         the whole book as one PDF, _build/html/speclab.pdf (needs Chromium)"
	@echo "make book-fresh  the same as make book, re-executing every page"
	@echo "make test        set up .venv and run the test suite (quiet, 13 to 25 minutes on 2 cores)"
	@echo "make audit [NAME ...]   run the audits whose committed report is stale (or these), rewrite their reports"
	@echo "make labs        rebuild solutions/<lab>/<lab>.ipynb from <lab>.md and the student notebooks in labs/"
	@echo "make grade LAB=lab1 SUBMISSIONS=<folder or zip>   autograde a class"
	@echo "make gradescope LAB=lab1   a Gradescope autograder zip in dist/"
	@echo "make student-release       the student edition: dist/student/ and dist/speclab-student.zip"
	@echo "make gpu-wheels  (on a machine with PyPI) fetch nbgrader & co. as wheels into .whl/ for a bare GPU image"
	@echo "make gpu-report  (on a CUDA machine) train the GPU pair, measure, write benchmarks/gpu/<device>-<date>.json"

# Installs only when requirements.txt or pyproject.toml changed since the last install.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# uv installs what pip would (the same requirements, pip's own configured indexes, links and constraints,
	@# and pip's choice of the best version across them), faster (a whole fresh set-up: 55 s against 72 s on
	@# 2 cores), and keeps build back-ends' notices to itself; where uv cannot be had or fails, pip installs as
	@# before. Installing uv itself shows errors only (-qq): a configured index that lacks uv makes pip warn.
	$(PY) -m pip install -qq uv && $(VENV)/bin/uv pip install -q --python $(PY) --index-strategy unsafe-best-match \
	    $$($(PY) -c "$$PIP_SOURCES_TO_UV") $(TORCH_INDEX_ARG) -r requirements.txt "$(TORCH_SPEC)" "$(SETUP_PINS)" \
	  || $(PY) -m pip install -q --no-compile $(TORCH_INDEX_ARG) -r requirements.txt "$(TORCH_SPEC)" "$(SETUP_PINS)"
	@# Byte-compiled once here, on every core (pip compiles one file at a time): where PYTHONDONTWRITEBYTECODE
	@# is set, as on the course's machines, nothing compiled later is kept. A few of torch's files are in
	@# Python 3.12 syntax and do not compile; pip's own step skips them the same way.
	$(PY) -m compileall -qq -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
	@rm -f $(VENV)/.installed-*
	@touch $@

setup: $(STAMP)

# The kernel the book's pages run in: ipykernel reached over CurveZMQ-encrypted sockets (book/_kernel/,
# whose docstring says why a package of its own). _config.yml maps the pages' python3 to it.
BOOK_KERNEL := $(VENV)/share/jupyter/kernels/speclab-book/kernel.json
$(BOOK_KERNEL): $(STAMP) book/_kernel/pyproject.toml book/_kernel/speclab_book_kernel.py
	@$(VENV)/bin/uv pip install -q --python $(PY) $$($(PY) -c "$$PIP_SOURCES_TO_UV") --no-deps -e ./book/_kernel \
	  || $(PY) -m pip install -q --no-deps -e ./book/_kernel
	@$(PY) -m speclab_book_kernel >/dev/null

# The execution cache is keyed on each page's code cells; pages also depend on the
# speclab package and on the reference measurements they show (benchmarks/cpu/reference.json), so
# the cache is dropped whenever either changes (and with it this build's live measurements).
_build/.speclab-hash: FORCE
	@mkdir -p _build
	@h=$$(cat speclab/*.py benchmarks/cpu/reference.json | md5sum | cut -c1-32); \
	 if [ "$$(cat $@ 2>/dev/null)" != "$$h" ]; then rm -rf _build/.jupyter_cache; echo "$$h" > $@; fi

html: setup $(BOOK_KERNEL) _build/.speclab-hash
	$(VENV)/bin/jupyter-book build . $(JB_FLAGS)

# The whole book as one PDF, offline: the single-page HTML (built from the execution cache of the
# HTML build: nothing is executed twice) printed by headless Chromium, quizzes and solutions open
# (book/_ext/print_pdf.py). Chromium: Debian's `chromium` package (.ci/run installs it).
# `print-pdf` alone prints a build that exists: BOOK_OUT is the folder holding its _build/
# (tests/book/test_pdf.py prints the test session's fresh build with it).
JB := $(VENV)/bin/jupyter-book
BOOK_OUT ?= $(CURDIR)
PDF = $(BOOK_OUT)/_build/html/speclab.pdf
pdf: html
	@$(MAKE) --no-print-directory print-pdf

# The PDF is printed again only when what it is printed from has changed: the single page, its static
# files, the printer and what its title page and contents read (CITATION.cff, _toc.yml), whose digest is
# kept beside it (speclab.pdf.digest). `make book` on an unchanged book says so instead of spending a
# minute and a half reprinting it. Sphinx adds a "?v=<checksum>" to the page's links to static files only
# once they exist (from the second build on): the page is digested without them.
SINGLE = $(BOOK_OUT)/_build/singlehtml
print-pdf:
	$(JB) build $(CURDIR) --path-output $(BOOK_OUT) --builder singlehtml $(JB_FLAGS)
	@digest=$$({ sed -E 's/\?v=[0-9a-f]+"/"/g' $(SINGLE)/book/intro.html; find $(SINGLE)/_static \
	   book/_ext/print_pdf.py CITATION.cff _toc.yml -type f -print0 | sort -z | xargs -0 sha256sum; } 2>/dev/null | sha256sum | cut -c1-64); \
	 if [ -f $(PDF) ] && [ "$$(cat $(PDF).digest 2>/dev/null)" = "$$digest" ]; then \
	   echo "The PDF is up to date (nothing it is printed from has changed): $(PDF)"; \
	 else \
	   rm -f $(PDF).digest && $(PY) book/_ext/print_pdf.py $(SINGLE) $(PDF) && echo "$$digest" > $(PDF).digest; \
	 fi

# The site and its PDF; on a machine without Chromium, the site alone (and a note saying so).
book: html
	@if $(PY) -c "import sys; sys.path.insert(0, 'book/_ext'); import print_pdf; sys.exit(print_pdf.find_chromium() is None)"; then \
	  $(MAKE) --no-print-directory print-pdf; \
	else echo "No Chromium on this machine: the PDF is not built (apt-get install chromium, then make pdf)"; fi
	@echo "Book: $(CURDIR)/_build/html/index.html"

book-fresh: setup
	rm -rf _build/.jupyter_cache _build/.speclab _build/html _build/singlehtml _build/jupyter_execute
	$(MAKE) --no-print-directory book

# The suite runs in TEST_WORKERS processes (pytest-xdist; tests/conftest.py groups the tests that share
# an expensive fixture): TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 2
test: setup $(BOOK_KERNEL)
	$(VENV)/bin/pytest -n $(TEST_WORKERS)

# What needs deliberate load, many students or a real lab's time (tests/README.md): each audit writes
# autograder/audit/reports/NAME.json, whose digest and verdicts `make test` checks. `make audit` runs those
# whose report does not hold for this tree; `make audit NAME ...` those; `make audit ALL=1` every one.
AUDIT_NAMES := $(filter-out audit,$(MAKECMDGOALS))
audit: setup
	$(PY) -m autograder.audit $(if $(ALL),--all) $(AUDIT_NAMES)
ifneq ($(filter audit,$(MAKECMDGOALS)),)
$(AUDIT_NAMES): ; @:
endif

# Every folder of solutions/ holding a MyST source <lab>/<lab>.md is one lab (assignment id = folder name):
# the source is converted (jupytext) into solutions/<lab>/<lab>.ipynb, then nbgrader writes labs/<lab>/.
LABS ?= $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard solutions/*/*.md)))))
labs: setup
	$(PY) -m autograder.authoring.labs $(LABS)
	@for lab in $(LABS); do \
	  PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/nbgrader generate_assignment "$$lab" --force; \
	done

# make grade LAB=lab1 SUBMISSIONS=<folder or zip> [WORKERS=2] [GRADE_ARGS="--force --cell-timeout 120"]
WORKERS ?= $(shell nproc 2>/dev/null || echo 1)
grade: setup
	@test -n "$(LAB)" -a -n "$(SUBMISSIONS)" || { echo "usage: make grade LAB=lab1 SUBMISSIONS=<folder or zip>"; exit 2; }
	$(PY) -m autograder grade "$(LAB)" "$(SUBMISSIONS)" --workers $(WORKERS) $(GRADE_ARGS)

# make gradescope LAB=lab1 [VISIBILITY=after_published]: dist/gradescope-lab1.zip (autograder/README.md, "Gradescope")
VISIBILITY ?= visible
gradescope: setup
	@test -n "$(LAB)" || { echo "usage: make gradescope LAB=lab1 [VISIBILITY=visible|after_published|after_due_date|hidden]"; exit 2; }
	$(PY) -m autograder gradescope "$(LAB)" --visibility "$(VISIBILITY)"

# The student edition: released notebooks, the speclab package, the book's PDF, a README; checked for leaks
# before it is written.
student-release: pdf
	$(PY) -m autograder student-release --book "$(PDF)"

# GPU tier (issues 20, 21): see benchmarks/gpu/README.md. Runs with the machine's own python3 and
# torch (a CUDA build), not .venv; STAGE=train|train-target|train-draft|report splits it.
gpu-report:
	bash benchmarks/gpu/run.sh

# nbgrader and its dependencies for the GPU image's Python 3.12, as wheels in .whl/ (ignored by git);
# packages the image already has (numpy, torch, jinja2, ...) are left out so they are not shadowed.
gpu-wheels:
	bash benchmarks/gpu/wheels.sh

clean:
	rm -rf _build dist

FORCE:
