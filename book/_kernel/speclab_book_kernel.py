"""The kernel the book's pages run in: ipykernel, reached over CurveZMQ-encrypted sockets.

Every page of the book is executed by myst-nb, which starts its kernels through jupyter-cache and nbclient
without passing them any configuration. Their kernel manager therefore keeps jupyter_client's default,
`transport_encryption = "disabled"`, and ipykernel (from 7.3, the release that added CurveZMQ) warns once per
page that it "is running over TCP without encryption". The setting cannot be reached from `_config.yml`.

What can be reached is the kernel a page names. `_config.yml` maps the pages' `python3` to the kernel
`speclab-book` (myst-nb's `nb_kernel_rgx_aliases`), whose kernel spec names the provisioner below
(jupyter_client's `kernel_provisioner` stanza, registered through this package's entry point). The
provisioner asks its manager for the policy "required": the manager then generates a CurveZMQ key pair,
writes it into the connection file, and its clients authenticate the kernel with the public key; a kernel
that cannot be encrypted fails to start instead of running in plain text.

`python -m speclab_book_kernel` installs the kernel spec into this environment (`make book` does it).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.provisioning import LocalProvisioner

KERNEL_NAME = "speclab-book"
PROVISIONER_NAME = "speclab-curve"  # pyproject.toml's entry point


class CurveProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner with transport encryption required of every kernel it launches."""

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["transport_encryption"] = "required"
        return await super().pre_launch(**kwargs)


def kernel_spec() -> dict[str, Any]:
    """ipykernel's own kernel spec for this Python, with its name and the provisioner above."""
    from ipykernel.kernelspec import get_kernel_dict

    spec = get_kernel_dict()
    if "curve" not in spec["metadata"].get("supported_encryption", ()):
        raise RuntimeError(
            "this ipykernel does not support CurveZMQ transport encryption: ipykernel>=7.3 does "
            "(requirements.txt asks for 7.4, the release the book is tested with)"
        )
    spec["display_name"] = "Python 3 (speclab book, encrypted)"
    spec["metadata"]["kernel_provisioner"] = {"provisioner_name": PROVISIONER_NAME, "config": {}}
    return spec


def install(prefix: str = sys.prefix) -> str:
    """Install the kernel spec `speclab-book` under PREFIX/share/jupyter/kernels; return its folder."""
    from ipykernel.kernelspec import write_kernel_spec

    with tempfile.TemporaryDirectory() as scratch:
        source = write_kernel_spec(Path(scratch) / KERNEL_NAME, overrides=kernel_spec())
        return KernelSpecManager().install_kernel_spec(source, KERNEL_NAME, prefix=prefix)


if __name__ == "__main__":
    print(f"kernel {KERNEL_NAME}: {install()}")
