"""Hostile students against the whole grading pipeline: each gets exactly the score it deserves.

Every notebook below attacks the grader in one of the standard ways (issue 15) on top of a
solution that is either right (deserves 5) or half right (`add` right, `scale` wrong:
deserves 2). All are graded in ONE run of `grade_class` on the tiny lab
(tests/grading_fixtures.py), 2 workers, in the bubblewrap sandbox, followed by two honest
students (`zz_good`, `zz_half`) graded last. Each test asserts, for its case:
- the exact score deserved;
- that nothing the student started is alive once the run is over;
- that no file outside the student's scratch folder changed (the course, the checks, the
  `speclab` package, the host's /tmp), and that the result was written by the grader;
- that the students graded after it got exactly their points.
`pytest tests/end_to_end/test_hostile.py -s` prints the table (case, score, deserved).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat
import pytest

import grading_fixtures as F
from released import seed_template  # one release of a lab per test process (tests/support/released.py)
from autograder import sandbox
from autograder.pipeline import REPO_ROOT, Config, build_template, grade_class
from autograder.sandbox import slot_uids
from autograder.sandbox import Limits
from load import scaled

pytestmark = pytest.mark.slow
LIMITS = Limits(cell_timeout_s=scaled(10), notebook_timeout_s=scaled(90), memory_mb=3072, file_mb=200, output_kb=64, processes=200,
                tmp_mb=256)
FULL, HALF = 5.0, 2.0
MARK = "speclab-hostile"  # every process a hostile notebook starts carries it in its command line

# The course path is only known at run time; notebooks find it the way an attacker would:
# from the working directory (OUT/work/<student>/autograded/<student>/tiny) and from
# the kernel's own sys.path / PYTHONPATH (the repository with autograder/ and speclab/).
FIND = """
import os, sys, glob
_here = os.getcwd()
_out = os.path.abspath(os.path.join(_here, '../../../../..'))
_repo = [p for p in sys.path + os.environ.get('PYTHONPATH', '').split(':') if p and os.path.isdir(os.path.join(p, 'autograder'))]
_repo = _repo[0] if _repo else ''
_targets = [_repo + '/tests/support/tiny_lab/tiny.py', _repo + '/autograder/checks/lab1.py',
            _repo + '/speclab/sampling.py', _out + '/course/nbgrader_config.py', _out + '/course/solutions/tiny/tiny.ipynb',
            _out + '/out/results/zz_good.json', _out + '/out/grades.csv', '/tmp/%s-host-tmp' % '{mark}']
""".replace("{mark}", MARK)

DETACH = FIND + """
import subprocess
_forger = r'''
import os, sys, time, glob, json, sqlite3
# {mark}: for a minute, rewrite every gradebook and result file in reach with full marks
out = sys.argv[1]
for _ in range(600):
    for db in glob.glob(out + '/**/gradebook.db', recursive=True) + glob.glob('/tmp/**/gradebook.db', recursive=True):
        try:
            c = sqlite3.connect(db)
            c.execute('update grade set auto_score = (select max_score from grade_cell where grade_cell.id = grade.cell_id)')
            c.commit()
        except Exception:
            pass
    for f in glob.glob(out + '/**/results/*.json', recursive=True):
        try:
            open(f, 'w').write(json.dumps({'score': 5}))
        except OSError:
            pass
    time.sleep(0.1)
'''
if os.fork() == 0:          # double fork + setsid + cleared environment
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, '-c', _forger, _out], {})
    os._exit(0)
subprocess.Popen(['setsid', sys.executable, '-c', _forger, _out], env={}, start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
""".replace("{mark}", MARK)

SOLUTION_THIEF = FIND + """
_stolen = None
for _t in _targets:
    try:
        _text = open(_t).read()
        if _t.endswith('tiny.ipynb'):
            _stolen = _text
    except OSError:
        pass
if _stolen:  # the reference solution: take its functions
    import json
    _src = [''.join(c['source']) for c in json.loads(_stolen)['cells'] if 'def scale' in ''.join(c['source'])][0]
    exec(_src.replace('### BEGIN SOLUTION', '').replace('### END SOLUTION', ''))
"""

COURSE_VANDAL = FIND + """
for _t in _targets:
    try:
        with open(_t, 'w') as _f:
            _f.write('def check_add(add):\\n    pass\\n\\n\\ndef check_scale(scale):\\n    pass\\n')
    except OSError:
        pass
    try:
        os.remove(_t)
    except OSError:
        pass
"""

IMPORT_HOOKS = """
import sys, types, importlib.abc, importlib.machinery
_fake = types.ModuleType('autograder.checks.tiny')
_fake.check_add = lambda add: None
_fake.check_scale = lambda scale: None
sys.modules['autograder.checks.tiny'] = _fake
class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith('autograder'):
            return importlib.machinery.ModuleSpec(name, None, is_package=True)
sys.meta_path.insert(0, _Finder())
import autograder.checks
autograder.checks.tiny = _fake
"""

BUILTINS = """
import builtins
builtins.abs = lambda x: 0  # abs(got - want) < tol always holds
builtins.all = lambda *a: True
_orig_import = builtins.__import__
def _imp(name, globals=None, locals=None, fromlist=(), level=0):
    m = _orig_import(name, globals, locals, fromlist, level)
    if 'checks' in name and hasattr(m, 'tiny'):
        m.tiny.check_add = m.tiny.check_scale = lambda f: None
    return m
builtins.__import__ = _imp
"""

FRAMES_GC = """
import gc, sys, types
def _noop(*a, **k):
    return None
def _neuter():
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__name__.startswith(('check_', 'run_check', '_serve_call')):
            try:
                obj.__code__ = _noop.__code__
            except (TypeError, ValueError):
                pass
    f = sys._getframe()
    while f is not None:   # walk up into whatever runs this code and rewrite its state
        for k, v in list(f.f_globals.items()):
            if k.startswith(('check_', 'passed', 'judged', 'scores')):
                f.f_globals[k] = _noop
        f = f.f_back
_neuter()
"""

PATCH_LIBS = """
import numpy as np, scipy.stats, torch
np.array_equal = lambda *a, **k: True
np.sum = lambda *a, **k: 1.5
scipy.stats.describe = lambda *a, **k: type('D', (), {'mean': -4.5})()
torch.allclose = lambda *a, **k: True
import speclab.sampling
speclab.sampling.generate = lambda *a, **k: __import__('time').sleep(5)
"""

FAKE_REPLIES = """
import sys, os
ip = get_ipython()
ip.showtraceback = lambda *a, **k: None
ip._showtraceback = lambda *a, **k: None
sys.excepthook = lambda *a: None
try:  # turn every error reply of the kernel into "ok"
    _send = ip.kernel.session.send
    def _fake_send(stream, msg_or_type, content=None, *a, **k):
        if isinstance(content, dict) and content.get('status') == 'error':
            content = {'status': 'ok', 'execution_count': content.get('execution_count'), 'user_expressions': {}, 'payload': []}
        return _send(stream, msg_or_type, content, *a, **k)
    ip.kernel.session.send = _fake_send
except Exception:
    pass
"""

EXIT_IN_SCALE = "def add(a, b):\n    return a + b\n\n\ndef scale(v, c):\n    import os\n    os._exit(0)\n"

FORK_BOMB = """
import os, time
_n = 0
for _ in range(5000):   # {mark}
    try:
        if os.fork() == 0:
            while True:
                time.sleep(0.5)
                try:
                    os.fork()
                except OSError:
                    pass
        _n += 1
    except OSError:
        break
print('forked', _n)
""".replace("{mark}", MARK)

HUGE = """
try:
    _big = bytearray(64 * 2**30)
except MemoryError:
    pass
try:
    with open('junk.bin', 'wb') as _f:
        for _ in range(400):
            _f.write(b'x' * 2**20)
except OSError:
    pass
try:
    with open('/tmp/junk.bin', 'wb') as _f:
        for _ in range(4000):
            _f.write(b'x' * 2**20)
except OSError:
    pass
_line = 'y' * 10**6
for _ in range(500):
    print(_line)
"""

SYMLINKS = FIND + """
for _i, _t in enumerate(_targets):
    for _name in ('link%d' % _i, '../../../gradebook.db.link%d' % _i):
        try:
            os.symlink(_t, _name)
        except OSError:
            pass
    try:
        with open('link%d' % _i, 'a') as _f:
            _f.write('tampered')
    except OSError:
        pass
try:  # replace the notebook nbgrader writes back, and the scratch gradebook, by links out
    os.symlink(_out + '/out/results/zz_good.json', 'tiny_link.ipynb')
    os.remove('../../../gradebook.db'); os.symlink(_targets[0], '../../../gradebook.db')
except OSError:
    pass
# a detached process plants links where the grader writes after the sandbox (tmp/, verdict/, logs)
import subprocess, sys
subprocess.Popen(['setsid', sys.executable, '-c', r'''
import os, sys, time, shutil
# {mark}
root, target = sys.argv[1], sys.argv[2]
for _ in range(300):
    for name in ('tmp', 'verdict', 'autograde.log', 'recheck.log', 'autograded'):
        p = os.path.join(root, name)
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.lexists(p):
                os.remove(p)
            os.symlink(target, p)
        except OSError:
            pass
    time.sleep(0.1)
'''.replace('{mark}', 'MARK'), os.path.abspath('../../..'), os.path.dirname(_targets[0])],
    env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
""".replace("MARK", MARK)

RESULT_FORGER = FIND + """
import json
for _f in (_out + '/out/results/forges_results.json', _out + '/out/results/zz_half.json', _out + '/out/grades.csv',
           '../../../../../results/forges_results.json'):
    try:
        os.makedirs(os.path.dirname(_f), exist_ok=True)
        open(_f, 'w').write(json.dumps({'student': 'forges_results', 'score': 5.0}))
    except OSError:
        pass
"""


def _cases(rel):
    """case -> (notebook, deserved score)."""
    S = F.student
    return {
        "detached_forger": (S(rel, F.HALF, after=[DETACH]), HALF),
        "detached_forger_full": (S(rel, after=[DETACH]), FULL),
        "reads_solutions": (S(rel, F.HALF, after=[SOLUTION_THIEF]), HALF),
        "writes_course_files": (S(rel, F.HALF, after=[COURSE_VANDAL]), HALF),
        "import_hooks": (S(rel, F.HALF, after=[IMPORT_HOOKS]), HALF),
        "builtins_patching": (S(rel, F.HALF, after=[BUILTINS]), HALF),
        "frames_and_gc": (S(rel, F.HALF, after=[FRAMES_GC]), HALF),
        "patches_libraries": (S(rel, F.HALF, after=[PATCH_LIBS]), HALF),
        "fakes_kernel_replies": (S(rel, F.HALF, after=[FAKE_REPLIES]), HALF),
        "os_exit_in_scale": (S(rel, EXIT_IN_SCALE), HALF),
        "os_exit_at_end": (S(rel, end=["import os\nos._exit(1)"]), FULL),
        "fork_bomb": (S(rel, after=[FORK_BOMB]), FULL),
        "huge_output_and_allocations": (S(rel, after=[HUGE]), FULL),
        "symlinks_out_of_scratch": (S(rel, F.HALF, after=[SYMLINKS]), HALF),
        "forges_results": (S(rel, F.HALF, after=[RESULT_FORGER]), HALF),
        "zz_good": (S(rel), FULL),
        "zz_half": (S(rel, F.HALF), HALF),
    }


def _digest(paths: list[Path]) -> dict:
    out = {}
    for root in paths:
        for p in sorted(root.rglob("*") if root.is_dir() else [root]):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _marked_processes() -> list[str]:
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if MARK in cmd and "pytest" not in cmd:
            found.append(f"{d.name}: {cmd[:100]}")
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    assert sandbox.capabilities().ok, sandbox.capabilities().missing
    base = tmp_path_factory.mktemp("hostile")
    course = F.make_course(base / "course")
    cfg = Config(F.LAB, base / "subs", base / "out", course, workers=2, limits=LIMITS, lab_checks=F.LAB_CHECKS)
    seed_template(cfg)
    build_template(cfg)
    rel = nbformat.read(cfg.out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    cases = _cases(rel)
    for name, (nb, _) in cases.items():
        d = cfg.submissions / name / F.LAB
        d.mkdir(parents=True)
        nbformat.write(nb, d / "tiny.ipynb")
    guarded = [course, REPO_ROOT / "autograder", REPO_ROOT / "speclab", F.TINY, cfg.out / "template"]
    before = _digest(guarded)
    results = {r["student"]: r for r in grade_class(cfg, progress=False)}
    after = _digest(guarded)
    stray = [str(p) for p in Path("/tmp").glob(f"{MARK}*")] + [str(p) for p in Path("/tmp").glob("junk.bin")]
    alive = _marked_processes() + [str(p) for slot in range(cfg.workers)
                                   for uid in slot_uids(slot)
                                   for p in sandbox.processes_of(uid)]
    return cfg, cases, results, before, after, stray, alive


@pytest.mark.parametrize("case", ["detached_forger", "detached_forger_full", "reads_solutions", "writes_course_files",
                                  "import_hooks", "builtins_patching", "frames_and_gc", "patches_libraries",
                                  "fakes_kernel_replies", "os_exit_in_scale", "os_exit_at_end", "fork_bomb",
                                  "huge_output_and_allocations", "symlinks_out_of_scratch", "forges_results",
                                  "zz_good", "zz_half"])
def test_case_gets_exactly_what_it_deserves(run, case):
    cfg, cases, results, before, after, stray, alive = run
    r = results[case]
    assert r["score"] == cases[case][1], (case, r["score"], r["problems"])
    assert r["sandbox"] is True
    # the result on disk is the grader's, whatever the student's processes tried
    import json

    on_disk = json.loads((cfg.out / "results" / f"{case}.json").read_text())
    assert on_disk == r
    assert (cfg.out / "work" / case).exists() is False


def test_nothing_the_students_started_is_alive(run):
    assert run[6] == []


def test_no_file_outside_the_scratch_folders_changed(run):
    _, _, _, before, after, stray, _ = run
    assert after == before
    assert stray == []


def test_students_graded_after_the_attacks_are_unaffected(run):
    cfg, _, results, *_ = run
    assert (results["zz_good"]["score"], results["zz_half"]["score"]) == (FULL, HALF)
    assert results["zz_good"]["problems"] == []
    # and a later run, with nothing changed, keeps every result as the grader wrote it
    again = {r["student"]: r for r in grade_class(cfg, progress=False)}
    assert again == results


def test_print_table(run):
    _, cases, results, *_ = run
    rows = [f"{'case':<30} {'score':>6} {'deserved':>9}"]
    rows += [f"{c:<30} {results[c]['score']:>6g} {cases[c][1]:>9g}" for c in cases]
    print("\n" + "\n".join(rows))
    seconds = sorted(results[c]["seconds"] for c in cases)
    print(f"per-student grading time: median {seconds[len(seconds) // 2]:.1f} s, max {seconds[-1]:.1f} s")
    assert all(results[c]["score"] == cases[c][1] for c in cases)
