/* Run a command under the part of Docker's default seccomp profile that decides whether a
 * sandbox can start in a container (moby's profiles/seccomp/default.json): without
 * CAP_SYS_ADMIN, the calls that make namespaces or mounts are refused.
 *   unshare, setns, mount, umount2, pivot_root  -> EPERM
 *   clone with any CLONE_NEW* flag               -> EPERM (plain clone, fork and threads pass)
 *   clone3                                       -> ENOSYS (Docker's answer: libc falls back to clone)
 * Every other call is allowed. Used by tests/support/emulate/gradescope.py to stand in for Gradescope's
 * container; the capability set is cut to Docker's 14 by setpriv around it.
 * Build: cc -O2 -o docker_seccomp docker_seccomp.c ; run: docker_seccomp CMD [ARG...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "docker_seccomp: only x86_64 and aarch64 are written out"
#endif

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif

#define NEW_NAMESPACES (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
                        CLONE_NEWNET | CLONE_NEWCGROUP)
#define REFUSE(nr, err) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err))

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CMD [ARG...]\n", argv[0]);
        return 2;
    }
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        REFUSE(__NR_unshare, EPERM),
        REFUSE(__NR_setns, EPERM),
        REFUSE(__NR_mount, EPERM),
        REFUSE(__NR_umount2, EPERM),
        REFUSE(__NR_pivot_root, EPERM),
        REFUSE(__NR_clone3, ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        /* clone's first argument is its flags on both architectures (low 32 bits) */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NEW_NAMESPACES, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("docker_seccomp: installing the filter");
        return 125;
    }
    execvp(argv[1], argv + 1);
    perror("docker_seccomp: exec");
    return 127;
}
