"""Students' code in a sandbox: the mechanism (`bwrap.py`, bubblewrap, limits, teardown) and the
policy (`policy.py`: what a student's sandbox sees, which uid it runs as, its environment)."""
from .bwrap import (INSTALL_HINT, Capabilities, Limits, Result, SandboxUnavailable, Session, bwrap_path,  # noqa: F401
                    capabilities, give_to, minimal_env, mount_args, processes_of, python_paths, reap_uid, require,
                    run, sandbox_argv, student_uid)
from .policy import (VERDICT_SLOTS, StudentBox, course_mounts, lock_down, no_links, scratch_path,  # noqa: F401
                     slot_uids)
