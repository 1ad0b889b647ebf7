"""A class graded as independent shards, then merged into the output one run writes.

`grade --shard I/N` grades the I-th of N shards of the class (0-based): the students in sorted order, every
N-th one from the I-th (`members`), so the shards are disjoint, cover the class, and do not depend on where
or when they run. Each shard is a run folder of its own, OUT/shards/I-of-N (`shard_out`): its template, its
results, its locks and its scratch, so that a shard killed halfway is resumed by the same command, and the
sweep of one shard never touches another's work. A finished shard writes its manifest, shard.json
(`Manifest`): the lab, I and N, a digest of the whole class's submissions, the version of the grading code
(results.grader_version) and its students.

`merge OUT` reads every manifest, refuses when a shard is missing or unfinished, when two shards saw another
class, or when any result was graded by other grading code than the rest (`check`), then gathers the
shards' results, graded notebooks and logs into OUT and writes grades.csv, gradebook.db, the LMS exports and
the feedback pages with the same code a single run uses (report.merge), so the output is the one a single
run writes from the same results.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from . import results
from .collect import submission_hash

SHARDS = "shards"
MANIFEST = "shard.json"


def parse(text: str) -> tuple[int, int]:
    """'I/N' -> (I, N), 0 <= I < N; ValueError with the rule otherwise."""
    try:
        i, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: write it I/N, the 0-based shard I of N shards, e.g. 0/4") from None
    if not 0 <= i < n:
        raise ValueError(f"--shard {text!r}: I must be at least 0 and below N (shards 0/{n} to {n - 1}/{n})"
                         if n > 0 else f"--shard {text!r}: N must be at least 1")
    return i, n


def members(students: list[str], i: int, n: int) -> list[str]:
    """The students of shard i of n: every n-th of the sorted class, from the i-th."""
    return sorted(students)[i::n]


def shard_out(out: Path, i: int, n: int) -> Path:
    """The run folder of shard i of n under the class's output folder."""
    return Path(out) / SHARDS / f"{i}-of-{n}"


def class_digest(students: dict[str, Path]) -> str:
    """A digest of the whole class: every student's name and what it handed in. Shards of one class agree on it."""
    h = hashlib.sha256()
    for s in sorted(students):
        h.update(f"{s}\0{submission_hash(students[s])}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Manifest:
    """What a finished shard says about itself (OUT/shards/I-of-N/shard.json)."""

    lab: str
    shard: int
    of: int
    submissions: str  # as the shard's command named them
    class_sha256: str  # class_digest of the whole class, as this shard collected it
    grader_version: str  # results.grader_version of the code that graded it
    students: list[str]

    def write(self, folder: Path) -> None:
        tmp = folder / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1, sort_keys=True) + "\n")
        os.replace(tmp, folder / MANIFEST)

    @classmethod
    def read(cls, folder: Path) -> Manifest | None:
        try:
            return cls(**json.loads((folder / MANIFEST).read_text()))
        except (OSError, ValueError, TypeError):
            return None


def finish(cfg, students: dict[str, Path], whole: dict[str, Path]) -> Manifest:
    """Write the manifest of a shard whose run is over (cfg: its Config, out its run folder)."""
    i, n = cfg.shard
    m = Manifest(cfg.lab, i, n, str(cfg.submissions), class_digest(whole),
                 results.grader_version(cfg.code_root, cfg.out / "template", cfg.lab_checks), sorted(students))
    m.write(cfg.out)
    return m


class Refused(SystemExit):
    """merge refuses the shards (the message says which and what to do)."""


def _command(lab: str, submissions: str, out: Path, i: int, n: int) -> str:
    return f"python -m autograder grade {lab} {submissions} --out {out} --shard {i}/{n}"


def check(out: Path) -> list[tuple[Path, Manifest]]:
    """The finished shards of OUT, in shard order, once they are all there and agree; Refused otherwise."""
    out = Path(out)
    folders = sorted(p for p in (out / SHARDS).glob("*-of-*") if p.is_dir()) if (out / SHARDS).is_dir() else []
    if not folders:
        raise Refused(f"{out}: no shards to merge (no {SHARDS}/I-of-N folder; grade them with "
                      f"`python -m autograder grade LAB SUBMISSIONS --out {out} --shard I/N`)")
    counts = sorted({p.name.split("-of-")[1] for p in folders})
    if len(counts) > 1:
        raise Refused(f"{out / SHARDS}: shards of different splits ({', '.join(f'of {c}' for c in counts)}); "
                      f"keep the folders of one split only")
    n = int(counts[0])
    manifests = {p: Manifest.read(p) for p in folders}
    done = {m.shard: (p, m) for p, m in manifests.items() if m is not None}
    first = next(iter(done.values()), (None, None))[1]
    lab, subs = (first.lab, first.submissions) if first else ("LAB", "SUBMISSIONS")
    unfinished = [i for i in range(n) if i not in done]
    if unfinished:
        raise Refused(f"{len(unfinished)} of {n} shards not finished (no {MANIFEST}): "
                      + "; ".join(_command(lab, subs, out, i, n) for i in unfinished)
                      + " (a shard that was stopped resumes where it stopped)")
    shards = [done[i] for i in range(n)]
    for what in ("lab", "class_sha256"):
        seen = {getattr(m, what) for _, m in shards}
        if len(seen) > 1:
            per = ", ".join(f"shard {m.shard}: {getattr(m, what)[:16]}" for _, m in shards)
            raise Refused(f"the shards graded different {'labs' if what == 'lab' else 'classes'} ({per}); "
                          f"grade every shard from the same submissions")
    versions: dict[str, list[str]] = {}
    for folder, m in shards:
        for s in m.students:
            r = results.load_result(folder, s)
            if r is None:
                raise Refused(f"shard {m.shard}: no result for {s!r} in {folder / 'results'}; grade the shard "
                              f"again: {_command(m.lab, m.submissions, out, m.shard, n)}")
            version = r.get("grader_version")  # absent from a failed student's result, which says so itself
            if version is not None:
                versions.setdefault(version, []).append(f"shard {m.shard}")
        versions.setdefault(m.grader_version, []).append(f"shard {m.shard}")
    if len(versions) > 1:
        per = "; ".join(f"version {v} in {', '.join(sorted(set(where)))}" for v, where in sorted(versions.items()))
        raise Refused(f"the shards were graded by different grading code ({per}). A class's grades come from one "
                      f"version: grade the out-of-date shards again with the code you keep (their command with "
                      f"--force), then merge")
    return shards


def gather(out: Path, shards: list[tuple[Path, Manifest]]) -> list[dict]:
    """The shards' results, graded notebooks and logs copied into OUT (as one run lays them out), and the
    template and collecting notes of shard 0 (every shard collected the whole class); the results, in
    student order."""
    out = Path(out)
    first = shards[0][0]
    template = out / "template"
    shutil.rmtree(template, ignore_errors=True)
    shutil.copytree(first / "template", template, symlinks=True)
    for name in ("collect_notes.json", "lms.json"):
        if (first / name).is_file():
            shutil.copyfile(first / name, out / name)
        else:
            (out / name).unlink(missing_ok=True)
    done = []
    for folder, m in shards:
        for s in m.students:
            r = results.load_result(folder, s)
            for sub in (Path("autograded") / s, Path("logs") / f"{s}.log"):
                src, dest = folder / sub, out / sub
                if dest.is_dir():
                    shutil.rmtree(dest)
                if src.is_dir():
                    shutil.copytree(src, dest, symlinks=True)
                elif src.is_file():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dest)
            results.save_result(out, s, r)
            done.append(r)
    stale = {p.stem for p in (out / "results").glob("*.json")} - {r["student"] for r in done}
    for s in stale:  # a student of an earlier merge that no shard holds now
        (out / "results" / f"{s}.json").unlink()
    return sorted(done, key=lambda r: r["student"])


def merge_shards(out: Path, course_root: Path, progress: bool = False):
    """Check and gather OUT's shards, then write what a single run writes (report.merge): grades.csv,
    gradebook.db, the LMS exports and the feedback pages. (the run's Config, the lab's layout, the results)."""
    from .config import Config
    from .nbgrader import gradebook_layout, in_lab_order
    from .report import merge

    out = Path(out).resolve()
    found = check(out)
    done = gather(out, found)
    first = found[0][1]
    unsafe = any(r.get("grader_version") is not None and not r.get("sandbox", False) for r in done)
    cfg = Config(first.lab, Path(first.submissions), out, Path(course_root), unsafe=unsafe)
    layout = in_lab_order(gradebook_layout(out / "template" / "gradebook.db", cfg.lab), out / "template" / "labs" / cfg.lab)
    merge(cfg, layout, done, progress)
    return cfg, layout, done
