"""The book's pages run in a kernel whose sockets are encrypted, so ipykernel has nothing to warn about.

ipykernel 7.4 warns "Kernel is running over TCP without encryption" on every kernel started
without CurveZMQ keys, which was once per executed page of `make book`. The build now maps the pages'
`python3` to the kernel `speclab-book` (book/_kernel/speclab_book_kernel.py), whose provisioner requires
encryption. These tests start both kernels the same way and read what each prints: the plain one must
warn (so the check can see a warning), the book's must not, and must be reached over CurveZMQ.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parents[2]
WARNING = "without encryption"


def book_kernel():
    try:
        import speclab_book_kernel
    except ImportError:
        pytest.fail("the book's kernel package is not installed: `make test` and `make book` install it "
                    "(pip install -e book/_kernel, then python -m speclab_book_kernel)")
    return speclab_book_kernel


def run_kernel(name: str, log: Path) -> tuple[dict, str]:
    """Start kernel NAME with its stderr in LOG, run one cell, stop it: (connection info, what it printed)."""
    km = KernelManager(kernel_name=name)
    with log.open("w") as err:
        km.start_kernel(stderr=err)
        try:
            client = km.client()
            client.start_channels()
            client.wait_for_ready(timeout=60)
            reply = client.execute_interactive("answer = 6 * 7", timeout=60)
            assert reply["content"]["status"] == "ok", reply["content"]
            client.stop_channels()
            info = km.get_connection_info()
        finally:
            km.shutdown_kernel(now=True)
    return info, log.read_text()


def test_the_build_runs_the_pages_python3_in_the_book_kernel():
    kernel = book_kernel()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    aliases = config["sphinx"]["config"]["nb_kernel_rgx_aliases"]
    targets = {target for pattern, target in aliases.items() if re.search(pattern, "python3")}
    assert targets == {kernel.KERNEL_NAME}, aliases
    try:
        spec = KernelSpecManager().get_kernel_spec(kernel.KERNEL_NAME)
    except NoSuchKernel:
        pytest.fail(f"kernel spec {kernel.KERNEL_NAME} is not installed: run `python -m speclab_book_kernel`")
    assert spec.metadata["kernel_provisioner"]["provisioner_name"] == kernel.PROVISIONER_NAME
    assert Path(spec.argv[0]).resolve() == Path(sys.executable).resolve() or spec.argv[0] == "python"


@pytest.mark.slow
def test_the_plain_kernel_warns_and_the_book_kernel_is_encrypted_and_silent(tmp_path):
    kernel = book_kernel()
    plain_info, plain_said = run_kernel("python3", tmp_path / "plain.log")
    assert WARNING in plain_said, "the plain kernel no longer warns: this check could not see the warning"
    assert "curve_publickey" not in plain_info

    book_info, book_said = run_kernel(kernel.KERNEL_NAME, tmp_path / "book.log")
    assert book_info.get("curve_publickey") and book_info.get("curve_secretkey"), \
        "the book's kernel was started without CurveZMQ keys"
    assert WARNING not in book_said, book_said


@pytest.mark.slow
def test_the_built_pages_name_the_kernel_their_source_names(html_root):
    """The build's kernel is for the build: each page's Thebe configuration (and its launch buttons and
    published notebook, test_published_notebooks.py) names the `python3` its source names."""
    kernel = book_kernel()
    pages = {p.relative_to(html_root): p.read_text() for p in html_root.rglob("*.html")}
    wrong = sorted(str(p) for p, text in pages.items() if f"kernelName = '{kernel.KERNEL_NAME}'" in text)
    right = [p for p, text in pages.items() if "kernelName = 'python3'" in text]
    assert right and not wrong, f"pages naming the build's kernel: {wrong}"
