/* Completes libfaketime for a member process whose clock the harness runs at another rate (elect_bench/fakeclock).
 *
 * libfaketime (Debian's 0.9.10) fakes clock_gettime, sleeps and the relative timeouts of poll/epoll/select, but
 * not sem_clockwait, where CPython waits for a lock with a timeout (threading.Lock, Event, Condition, queue): the
 * deadline it passes is on the faked clock, which the kernel does not know, so the wait never ends. Here the wait
 * is re-expressed on the real clock: the faked time left, divided by the rate the harness wrote in the spec file.
 * At load it also writes the real wall time to SPEC.start: libfaketime scales time from its own start, and the
 * harness needs that instant to change the rate later without a jump.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL

static double spec_rate(void) {
    const char *path = getenv("FAKETIME_TIMESTAMP_FILE");
    double rate = 1.0;
    FILE *spec = path ? fopen(path, "r") : NULL;
    if (spec) {
        char text[128] = {0};
        if (fgets(text, sizeof text, spec)) {
            char *x = strchr(text, 'x');
            if (x) rate = strtod(x + 1, NULL);
        }
        fclose(spec);
    }
    return rate > 0 ? rate : 1.0;
}

__attribute__((constructor)) static void record_start(void) {
    const char *path = getenv("FAKETIME_TIMESTAMP_FILE");
    if (!path) return;
    struct timespec now;
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &now); /* the real clock: libfaketime answers the libc call */
    char name[4096];
    snprintf(name, sizeof name, "%s.start", path);
    FILE *out = fopen(name, "w");
    if (out) {
        fprintf(out, "%lld.%09ld\n", (long long)now.tv_sec, now.tv_nsec);
        fclose(out);
    }
}

typedef int (*sem_clockwait_fn)(sem_t *, clockid_t, const struct timespec *);

int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime) {
    static sem_clockwait_fn next;
    if (!next) next = (sem_clockwait_fn)dlsym(RTLD_NEXT, "sem_clockwait");
    struct timespec faked, real, deadline;
    clock_gettime(clock, &faked); /* through libfaketime */
    syscall(SYS_clock_gettime, clock, &real);
    long long left = (long long)(abstime->tv_sec - faked.tv_sec) * NS + (abstime->tv_nsec - faked.tv_nsec);
    if (left < 0) left = 0;
    long long at = (long long)real.tv_sec * NS + real.tv_nsec + (long long)(left / spec_rate());
    deadline.tv_sec = at / NS;
    deadline.tv_nsec = at % NS;
    return next(sem, clock, &deadline);
}
