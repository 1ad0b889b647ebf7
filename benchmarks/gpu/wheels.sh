#!/usr/bin/env bash
# Wheels for a bare GPU image (Python 3.12, x86-64, no network): nbgrader and jsonschema with their
# dependencies, for the Lab 2 autograding and the schema check of benchmarks/gpu/run.sh, and jupytext,
# which reads the Lab 2 reference decoder out of solutions/lab2/lab2.md for the spec table.
# Run it where PyPI is reachable, in the repository root; it fills .whl/ (ignored by git), which
# the device call carries (carry: [".whl"]) and run.sh installs into /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
rm -rf .whl && mkdir -p .whl
$PY -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "nbgrader==0.9.*" "jsonschema>=4.18" "jupytext>=1.16"
# Leave out what the GPU image already holds (its list: python3 -m pip list there), so that
# /tmp/site does not shadow the image's own builds of them.
for name in numpy torch jinja2 markupsafe pyyaml requests urllib3 idna certifi charset_normalizer attrs \
            packaging python_dateutil six pygments typing_extensions tqdm anyio h11 httpx httpcore click \
            rich markdown_it_py mdurl psutil filelock fsspec tabulate setuptools wheel pip prometheus_client \
            sympy mpmath networkx \
            `# not needed to autograde (front-ends, debugger): keeps .whl/ near 31 MB; IPython needs jedi` \
            jupyterlab jupyterlab_server jupyterlab_widgets jupyter_lsp jupyter_builder notebook notebook_shim \
            babel json5 async_lru widgetsnbextension ipywidgets debugpy; do
  find .whl -maxdepth 1 \( -iname "$name-*.whl" -o -iname "${name//_/-}-*.whl" \) -delete
done
du -sh .whl
ls .whl | wc -l
