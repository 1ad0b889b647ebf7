"""The wire between the grader and the student's sandbox: plain, validated values only.

Both ends use this module: the harness in the sandbox (`harness.py`) and the grader's end
(autograder/pipeline/judge.py). A value crosses as JSON-able data (numbers, strings, lists,
tuples, dicts, numpy arrays and torch tensors of numeric dtypes, random generator states, the
course's own dataclasses, and named references to objects both sides rebuild from the course's
code); anything else raises `Unportable` on either side, so no object of the student's ever
exists in the grader.
"""
from __future__ import annotations

import base64
import builtins
import collections.abc
import dataclasses
import importlib
import sys
from typing import Callable

MAX_LINE = 1 << 30  # largest message either side accepts (Lab 1 sends two 320 MB arrays, base64, in one call)
CACHE_BYTES = 256 << 10  # arrays at least this large are sent once per session, then named
MAX_DEPTH = 32
DTYPE_KINDS = "biufc"  # numeric numpy dtypes only: no objects, no pickles


class Unportable(TypeError):
    """A value the grader does not send to (or accept from) the sandbox."""


# ----------------------------------------------------------------------------- errors
def error_of(err: BaseException) -> list[str]:
    """An exception as it crosses: [name of its nearest built-in class, message]. A student's own
    `class BadInput(ValueError)` crosses as a ValueError (its message names the class), so a check
    expecting ValueError sees one, as it would in the notebook itself."""
    base = next((c for c in type(err).__mro__ if getattr(builtins, c.__name__, None) is c), Exception)
    text = str(err)[:2000]
    if base is not type(err):
        text = f"{type(err).__name__}: {text}"
    return [base.__name__, text]


# ----------------------------------------------------------------------------- plain values
def encode(x, refs: dict | None = None, depth: int = 0):
    """x as JSON-able data; refs: id(object) -> name of an object both sides can rebuild."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise Unportable("nested too deeply")
    if refs is not None and id(x) in refs and refs[id(x)][0] is x:
        return {"__ref__": refs[id(x)][1]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, np.generic):
        return {"__npscalar__": encode(np.asarray(x), refs, depth + 1)}
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in DTYPE_KINDS:
            raise Unportable(f"array of dtype {x.dtype}")
        if x.ndim >= 2 and x.nbytes >= CACHE_BYTES and len(x) > 1 and (x.strides[0] == 0 or _rows_alike(x)):
            # rows all alike (the checks' np.broadcast_to or np.tile of one (p, q) pair): one row and a count
            return {"__tile__": encode(x[0], None, depth + 1), "reps": len(x)}
        out = {"__nd__": x.dtype.str, "shape": list(x.shape)}
        small = _narrow_int(x)
        if small is not None:  # e.g. int64 tokens of a small vocabulary travel as int8, back to int64 on arrival
            out["as"], x = small.str, x.astype(small)
        out["b64"] = base64.b64encode(x.tobytes(order="C")).decode()
        return out
    if isinstance(x, np.random.Generator):
        return {"__rng__": x.bit_generator.state}
    if isinstance(x, (list, tuple)):
        items = [encode(v, refs, depth + 1) for v in x]
        return items if isinstance(x, list) else {"__tuple__": items}
    if isinstance(x, collections.abc.Sequence) and not isinstance(x, (bytes, bytearray, memoryview)):
        # any other sequence (a deque, a range, an array.array) arrives as the list of its items, as
        # nbgrader itself would accept it
        return [encode(v, refs, depth + 1) for v in x]
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise Unportable("dict with non-string keys")
        return {"__dict__": {k: encode(v, refs, depth + 1) for k, v in x.items()}}
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(x, torch.Tensor):
            if x.dtype == torch.bfloat16 or x.is_sparse:
                raise Unportable(f"tensor of dtype {x.dtype}")
            return {"__torch__": str(x.dtype).replace("torch.", ""), "device": x.device.type,
                    "nd": encode(x.detach().cpu().numpy(), None, depth + 1)}
        if isinstance(x, torch.device):
            return {"__device__": str(x)}
        if isinstance(x, torch.Generator):
            return {"__tgen__": encode(x.get_state().numpy(), None, depth + 1), "device": x.device.type}
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and type(x).__module__.startswith("speclab."):
        return {"__dc__": f"{type(x).__module__}:{type(x).__qualname__}",
                "fields": {f.name: encode(getattr(x, f.name), refs, depth + 1) for f in dataclasses.fields(x)}}
    raise Unportable(f"a {type(x).__module__}.{type(x).__qualname__} cannot cross the sandbox")


def _rows_alike(x) -> bool:
    """Every row of x bit for bit the same as the first (so -0.0 and 0.0 differ, a NaN equals itself)."""
    import numpy as np

    b = np.ascontiguousarray(x).view(np.uint8).reshape(len(x), -1)
    return bool((b == b[0]).all())


def _narrow_int(x) -> "object | None":
    """The smallest integer dtype holding every value of a large integer array, when smaller than
    its own (the batch samplers' outputs are int64 tokens of a 4-token vocabulary: sent as int8,
    the pipe carries 8 times fewer bytes, which the grader's timing of the round trip would count)."""
    import numpy as np

    if x.dtype.kind not in "iu" or x.size < 1024 or x.dtype.itemsize == 1:
        return None
    lo, hi = int(x.min()), int(x.max())
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return np.dtype(t) if np.dtype(t).itemsize < x.dtype.itemsize else None
    return None


def decode(d, resolve: Callable[[str], object] | None = None, depth: int = 0):
    """The inverse of encode, validating as it goes (resolve: ref name -> object, or None to refuse)."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise Unportable("nested too deeply")
    if d is None or isinstance(d, (bool, int, float, str)):
        return d
    if isinstance(d, list):
        return [decode(v, resolve, depth + 1) for v in d]
    if not isinstance(d, dict) or len(d) == 0:
        raise Unportable(f"unexpected {type(d).__name__}")
    if "__nd__" in d:
        dtype = np.dtype(str(d["__nd__"]))
        sent = np.dtype(str(d["as"])) if "as" in d else dtype
        shape = tuple(int(s) for s in d["shape"])
        raw = base64.b64decode(str(d["b64"]), validate=True)
        if dtype.kind not in DTYPE_KINDS or any(s < 0 for s in shape) or \
                int(np.prod(shape, dtype=np.int64)) * sent.itemsize != len(raw):
            raise Unportable("malformed array")
        if sent != dtype and not (sent.kind == "i" and dtype.kind in "iu" and sent.itemsize < dtype.itemsize):
            raise Unportable("malformed array")
        arr = np.frombuffer(raw, dtype=sent).reshape(shape)
        return arr.astype(dtype) if sent != dtype else arr.copy()
    if "__tile__" in d:
        row = decode(d["__tile__"], None, depth + 1)
        reps = int(d["reps"])
        if not isinstance(row, np.ndarray) or reps < 0 or reps * row.nbytes > MAX_LINE:
            raise Unportable("malformed array")
        return np.tile(row, (reps,) + (1,) * row.ndim)
    if "__npscalar__" in d:
        return decode(d["__npscalar__"], resolve, depth + 1)[()]
    if "__tuple__" in d:
        return tuple(decode(v, resolve, depth + 1) for v in d["__tuple__"])
    if "__dict__" in d:
        return {str(k): decode(v, resolve, depth + 1) for k, v in dict(d["__dict__"]).items()}
    if "__rng__" in d:
        rng = np.random.default_rng()
        state = dict(d["__rng__"])
        if state.get("bit_generator") != "PCG64":
            rng = np.random.Generator(getattr(np.random, str(state.get("bit_generator")))())
        rng.bit_generator.state = state
        return rng
    if "__torch__" in d:
        import torch

        arr = decode(d["nd"], None, depth + 1)
        dtype = getattr(torch, str(d["__torch__"]))
        if not isinstance(dtype, torch.dtype):
            raise Unportable("not a torch dtype")
        return torch.from_numpy(arr).to(dtype)
    if "__device__" in d:
        import torch

        return torch.device(str(d["__device__"]))
    if "__tgen__" in d:
        import torch

        g = torch.Generator()
        g.set_state(torch.from_numpy(decode(d["__tgen__"], None, depth + 1)).to(torch.uint8))
        return g
    if "__dc__" in d:
        mod, _, name = str(d["__dc__"]).partition(":")
        if not mod.startswith("speclab."):
            raise Unportable("only the course's own dataclasses cross")
        cls = getattr(importlib.import_module(mod), name)
        if not dataclasses.is_dataclass(cls):
            raise Unportable("not a dataclass")
        return cls(**{k: decode(v, resolve, depth + 1) for k, v in dict(d["fields"]).items()})
    if "__ref__" in d and resolve is not None:
        return resolve(list(d["__ref__"]))
    raise Unportable(f"unexpected value {str(d)[:80]}")




# ----------------------------------------------------------------------------- random generators
def rng_states(args) -> list:
    """New states of the random generators among args (so the grader's generators advance)."""
    import numpy as np

    out = []
    for a in args:
        if isinstance(a, np.random.Generator):
            out.append(a.bit_generator.state)
        elif "torch" in sys.modules and isinstance(a, sys.modules["torch"].Generator):
            out.append({"__tgen__": encode(a.get_state().numpy())})
        else:
            out.append(None)
    return out


def global_states() -> tuple:
    """The process-wide random generators' states (numpy's legacy one, torch's CPU one if loaded),
    as bytes: compared before and after the student's calls."""
    import numpy as np

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    out = [keys.tobytes() + repr((kind, pos, has_gauss, gauss)).encode()]
    torch = sys.modules.get("torch")
    out.append(torch.get_rng_state().numpy().tobytes() if torch is not None else b"")
    return tuple(out)


def moved_since(before: tuple) -> list[str]:
    """Which global generators the student's calls moved since `before` ("numpy", "torch")."""
    return [name for name, a, b in zip(("numpy", "torch"), before, global_states()) if a != b and a]


def move_globals(moved) -> None:
    """In the grader: move this process's global generators as the student's calls moved theirs,
    so a check comparing the global states before and after (inside `alone()`) sees what the
    student's process did."""
    import numpy as np

    names = set(moved or ()) if isinstance(moved, list) else set()
    if "numpy" in names:
        np.random.random()
    if "torch" in names:
        import torch

        torch.rand(1)


def set_rng(a, st) -> None:
    import numpy as np

    if isinstance(a, np.random.Generator):
        if not isinstance(st, dict) or st.get("bit_generator") != a.bit_generator.state["bit_generator"]:
            raise ValueError("random generator state")
        a.bit_generator.state = st
    else:
        a.set_state(decode(st).get_state())
