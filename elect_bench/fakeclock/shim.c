/* Completes libfaketime for a member process whose clock the harness runs at another rate (elect_bench/fakeclock).
 *
 * libfaketime (Debian's 0.9.10) fakes clock_gettime, sleeps and the relative timeouts of poll/epoll/select, but
 * its waits on an absolute deadline are wrong or missing: sem_clockwait (where CPython waits for a lock with a
 * timeout: threading.Lock, Event, Condition, queue) is not wrapped, so a deadline on the faked clock, which the
 * kernel does not know, never comes; its sem_timedwait mis-scales the deadline under a rate; its
 * pthread_cond_timedwait returns at once on a condition variable of CLOCK_REALTIME; and C11's cnd_timedwait
 * (glibc's own, where librdkafka's threads wait) is wrapped by nobody, so the kernel gets the faked deadline as it
 * is: with the faked clock behind the real one every short wait ends at once (the thread spins), ahead of it
 * every wait lasts the difference longer (a group heartbeat goes out late). Here every such wait is re-expressed
 * on the real clock: the faked time left, divided by the rate the harness wrote in the spec file, from the real
 * now, and handed to glibc's own clock-taking wait. A condition variable's clock is recorded when it is
 * initialised. At load the shim also writes the real wall time to SPEC.start: libfaketime scales time from its
 * own start, and the harness needs that instant to change the rate later without a jump.
 *
 * libfaketime re-reads the spec (FAKETIME_NO_CACHE) into process-wide variables, the offset and the rate one after
 * the other, while other threads read the clock: a thread could compute with the new rate and the old offset, a
 * jump of the rate change times the time since load (tens of seconds after a few minutes at 1.05; a leadership's
 * deadline or a heartbeat's send time with it). The shim takes one lock around every clock read it passes on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <threads.h>
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

/* Clock reads, one at a time through libfaketime (a recursive lock: a signal handler may read the clock while its
 * thread holds it). */
static pthread_mutex_t clock_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);
typedef time_t (*time_fn)(time_t *);

int clock_gettime(clockid_t clock, struct timespec *now) {
    static clock_gettime_fn next;
    if (!next) next = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    pthread_mutex_lock(&clock_lock);
    int done = next(clock, now);
    pthread_mutex_unlock(&clock_lock);
    return done;
}

int gettimeofday(struct timeval *now, void *zone) {
    static gettimeofday_fn next;
    if (!next) next = (gettimeofday_fn)dlsym(RTLD_NEXT, "gettimeofday");
    pthread_mutex_lock(&clock_lock);
    int done = next(now, zone);
    pthread_mutex_unlock(&clock_lock);
    return done;
}

time_t time(time_t *now) {
    static time_fn next;
    if (!next) next = (time_fn)dlsym(RTLD_NEXT, "time");
    pthread_mutex_lock(&clock_lock);
    time_t done = next(now);
    pthread_mutex_unlock(&clock_lock);
    return done;
}

/* The real deadline, on `clock`, of a wait until `abstime` on the faked `clock`. */
static struct timespec real_deadline(clockid_t clock, const struct timespec *abstime) {
    struct timespec faked, real, deadline;
    clock_gettime(clock, &faked); /* through libfaketime */
    syscall(SYS_clock_gettime, clock, &real);
    long long left = (long long)(abstime->tv_sec - faked.tv_sec) * NS + (abstime->tv_nsec - faked.tv_nsec);
    if (left < 0) left = 0;
    long long at = (long long)real.tv_sec * NS + real.tv_nsec + (long long)(left / spec_rate());
    deadline.tv_sec = at / NS;
    deadline.tv_nsec = at % NS;
    return deadline;
}

typedef int (*sem_clockwait_fn)(sem_t *, clockid_t, const struct timespec *);

static sem_clockwait_fn glibc_sem_clockwait(void) {
    static sem_clockwait_fn next;
    if (!next) next = (sem_clockwait_fn)dlsym(RTLD_NEXT, "sem_clockwait"); /* libfaketime has none: glibc's */
    return next;
}

int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime) {
    struct timespec deadline = real_deadline(clock, abstime);
    return glibc_sem_clockwait()(sem, clock, &deadline);
}

int sem_timedwait(sem_t *sem, const struct timespec *abstime) {
    struct timespec deadline = real_deadline(CLOCK_REALTIME, abstime);
    return glibc_sem_clockwait()(sem, CLOCK_REALTIME, &deadline);
}

/* Condition variables: the clock each was initialised with (CLOCK_REALTIME unless its attributes say otherwise),
 * in a small open-addressed table keyed by address; one not found (a static initialiser) is CLOCK_REALTIME. */
#define CONDS 4096
static pthread_cond_t *cond_keys[CONDS];
static clockid_t cond_clocks[CONDS];

static size_t cond_slot(const pthread_cond_t *cond) { return ((size_t)cond >> 4) % CONDS; }

static clockid_t cond_clock(const pthread_cond_t *cond) {
    size_t slot = cond_slot(cond);
    for (size_t i = 0; i < CONDS; i++, slot = (slot + 1) % CONDS) {
        pthread_cond_t *key = __atomic_load_n(&cond_keys[slot], __ATOMIC_ACQUIRE);
        if (key == cond) return cond_clocks[slot];
        if (key == NULL) break;
    }
    return CLOCK_REALTIME;
}

typedef int (*cond_init_fn)(pthread_cond_t *, const pthread_condattr_t *);
typedef int (*cond_clockwait_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);

int pthread_cond_init(pthread_cond_t *cond, const pthread_condattr_t *attr) {
    static cond_init_fn next;
    if (!next) next = (cond_init_fn)dlvsym(RTLD_NEXT, "pthread_cond_init", "GLIBC_2.3.2");
    clockid_t clock = CLOCK_REALTIME;
    if (attr) pthread_condattr_getclock(attr, &clock);
    size_t slot = cond_slot(cond);
    for (size_t i = 0; i < CONDS; i++, slot = (slot + 1) % CONDS) {
        pthread_cond_t *key = __atomic_load_n(&cond_keys[slot], __ATOMIC_ACQUIRE);
        if (key == cond) { cond_clocks[slot] = clock; break; }
        pthread_cond_t *empty = NULL;
        if (key == NULL) {
            cond_clocks[slot] = clock;
            if (__atomic_compare_exchange_n(&cond_keys[slot], &empty, cond, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                break;
        }
    }
    return next(cond, attr);
}

static cond_clockwait_fn glibc_cond_clockwait(void) {
    static cond_clockwait_fn next;
    if (!next) next = (cond_clockwait_fn)dlsym(RTLD_NEXT, "pthread_cond_clockwait"); /* libfaketime has none */
    return next;
}

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *abstime) {
    clockid_t clock = cond_clock(cond);
    struct timespec deadline = real_deadline(clock, abstime);
    return glibc_cond_clockwait()(cond, mutex, clock, &deadline);
}

int pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                           const struct timespec *abstime) {
    struct timespec deadline = real_deadline(clock, abstime);
    return glibc_cond_clockwait()(cond, mutex, clock, &deadline);
}

/* C11 threads (glibc's cnd_timedwait, on TIME_UTC: the wall clock). */
typedef int (*cnd_timedwait_fn)(cnd_t *, mtx_t *, const struct timespec *);

int cnd_timedwait(cnd_t *cond, mtx_t *mutex, const struct timespec *abstime) {
    static cnd_timedwait_fn next;
    if (!next) next = (cnd_timedwait_fn)dlsym(RTLD_NEXT, "cnd_timedwait");
    struct timespec deadline = real_deadline(CLOCK_REALTIME, abstime);
    return next(cond, mutex, &deadline);
}
