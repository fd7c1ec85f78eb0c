// Command etcd-election runs one member of the etcd-election anchor: etcd's own Go client
// (go.etcd.io/etcd/client/v3 and its concurrency package) electing a leader per role, with the
// event lines of the elect adapter contract on stdout.
//
// One session (one lease) per member, shared by all its roles; one goroutine per role campaigns
// on the election P/<role>. Leadership ends only when the session's Done() channel closes (the
// lease was lost or its keepalive gave up) or on SIGTERM/SIGINT (Resign, then close the session).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// event is one stdout line of the adapter contract.
type event struct {
	TS     float64 `json:"ts"`
	Mono   float64 `json:"mono"`
	Member string  `json:"member"`
	Role   string  `json:"role"`
	Event  string  `json:"event"`
	Token  int64   `json:"token"`
}

var outMu sync.Mutex

func monotonic() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		log.Fatalf("clock_gettime(CLOCK_MONOTONIC): %v", err)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// emit writes one event line to stdout at once (os.Stdout is unbuffered).
func emit(member, role, what string, token int64) {
	outMu.Lock()
	defer outMu.Unlock()
	now := time.Now()
	line, _ := json.Marshal(event{
		TS:     float64(now.UnixNano()) / 1e9,
		Mono:   monotonic(),
		Member: member,
		Role:   role,
		Event:  what,
		Token:  token,
	})
	if _, err := os.Stdout.Write(append(line, '\n')); err != nil {
		log.Printf("stdout: %v", err)
	}
}

type member struct {
	id     string
	roles  []string
	prefix string
	ttl    int
	cli    *clientv3.Client
	root   context.Context // cancelled on SIGTERM/SIGINT
}

// stopGrace bounds each step of the graceful stop, so the process exits within a few seconds
// even when etcd does not answer.
const stopGrace = 2 * time.Second

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("etcd-election: ")

	id := flag.String("id", "", "member id (required)")
	rolesFlag := flag.String("roles", "", "comma-separated role names this member contends for (required)")
	endpointsFlag := flag.String("endpoints", "", "comma-separated etcd client endpoints, host:port or http://host:port (required)")
	prefix := flag.String("prefix", "elect-anchor", "key prefix; role r's election key is PREFIX/r")
	ttl := flag.Int("ttl", 0, "session (lease) TTL in whole seconds, >= 1 (required)")
	dialTimeout := flag.Duration("dial-timeout", 5*time.Second, "etcd client dial timeout")
	flag.Parse()

	if *id == "" || *rolesFlag == "" || *endpointsFlag == "" {
		fmt.Fprintln(os.Stderr, "etcd-election: --id, --roles and --endpoints are required")
		flag.Usage()
		os.Exit(2)
	}
	if *ttl < 1 {
		fmt.Fprintln(os.Stderr, "etcd-election: --ttl must be an integer >= 1 (etcd leases are whole seconds)")
		os.Exit(2)
	}
	roles := splitList(*rolesFlag)
	endpoints := splitList(*endpointsFlag)
	if len(roles) == 0 || len(endpoints) == 0 {
		fmt.Fprintln(os.Stderr, "etcd-election: empty --roles or --endpoints")
		os.Exit(2)
	}
	pfx := strings.TrimRight(*prefix, "/")

	root, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	logger, err := zap.NewProduction() // JSON logs on stderr, as etcd's client does by default
	if err != nil {
		log.Fatalf("zap: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: *dialTimeout,
		Logger:      logger,
	})
	if err != nil {
		log.Fatalf("etcd client %v: %v", endpoints, err)
	}

	m := &member{id: *id, roles: roles, prefix: pfx, ttl: *ttl, cli: cli, root: root}
	m.run(strings.Join(endpoints, ","))

	done := make(chan struct{})
	go func() { _ = cli.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		log.Printf("client close did not finish in %v", stopGrace)
	}
	log.Printf("%s stopped", m.id)
	os.Exit(0)
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// newSession makes the member's session: concurrency.NewSession grants a lease of --ttl seconds
// and keeps it alive. NewSession's own context also bounds the keepalive and Close's revoke, so it
// must outlive SIGTERM; it is cancelled on SIGTERM only while the grant is still pending.
func (m *member) newSession() (*concurrency.Session, context.CancelFunc, error) {
	sctx, scancel := context.WithCancel(context.Background())
	pending := make(chan struct{})
	go func() {
		select {
		case <-m.root.Done():
			scancel()
		case <-pending:
		}
	}()
	s, err := concurrency.NewSession(m.cli, concurrency.WithTTL(m.ttl), concurrency.WithContext(sctx))
	close(pending)
	if err != nil {
		scancel()
		return nil, nil, err
	}
	return s, scancel, nil
}

// run keeps one session alive at a time and, in it, campaigns for every role, until SIGTERM.
func (m *member) run(endpoints string) {
	started := false
	for m.root.Err() == nil {
		sess, release, err := m.newSession()
		if err != nil {
			if m.root.Err() != nil {
				break
			}
			log.Printf("%s: new session: %v (retrying)", m.id, err)
			sleep(m.root, 500*time.Millisecond)
			continue
		}
		log.Printf("%s: session lease %x (ttl %ds)", m.id, int64(sess.Lease()), m.ttl)
		if !started {
			fmt.Fprintf(os.Stderr, "elect member: %s started on etcd-election://%s\n", m.id, endpoints)
			started = true
		}

		// the campaigns of this session end when the session is done or on SIGTERM
		sessCtx, cancel := context.WithCancel(m.root)
		go func() {
			select {
			case <-sess.Done():
				cancel()
			case <-sessCtx.Done():
			}
		}()
		var wg sync.WaitGroup
		for _, role := range m.roles {
			wg.Add(1)
			go func(role string) {
				defer wg.Done()
				m.role(sessCtx, sess, role)
			}(role)
		}

		if m.root.Err() == nil {
			select {
			case <-sess.Done():
			case <-m.root.Done():
			}
		}
		cancel()
		if m.root.Err() != nil {
			// graceful stop: every led role resigns (bounded), then the lease is revoked
			waitBounded(&wg, 2*stopGrace)
			closeBounded(sess)
			release()
			return
		}
		wg.Wait()
		log.Printf("%s: session lease %x done (lease lost or keepalive gave up); starting a new session", m.id, int64(sess.Lease()))
		// the old lease is gone or about to expire: revoke it without holding up the new session
		go func() { _ = sess.Close(); release() }()
	}
}

// role campaigns for one role in one session and holds it until the session is done or SIGTERM.
func (m *member) role(ctx context.Context, sess *concurrency.Session, role string) {
	e := concurrency.NewElection(sess, m.prefix+"/"+role)
	for {
		err := e.Campaign(ctx, m.id)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return // session done or SIGTERM: Campaign has withdrawn its key itself
		}
		log.Printf("%s: campaign for role %s: %v (retrying)", m.id, role, err)
		if !sleep(ctx, 200*time.Millisecond) {
			return
		}
	}
	// Campaign returned nil. It also does so after our own key went away with the lease while we
	// waited, so a won campaign counts only while the session is still alive.
	select {
	case <-sess.Done():
		log.Printf("%s: campaign for role %s ended with the session already done", m.id, role)
		return
	case <-m.root.Done():
		m.resign(e, role)
		return
	default:
	}
	token := e.Rev() // create revision of our leader key: etcd's documented fencing value
	emit(m.id, role, "acquired", token)
	log.Printf("%s: leads role %s (key %s, rev %d)", m.id, role, e.Key(), token)

	select {
	case <-sess.Done():
	case <-m.root.Done():
	}
	if m.root.Err() != nil {
		// SIGTERM: the application stops leading first, then gives the role up the way the API does, by
		// deleting its leader key (the other order would let the successor start while we still claim it)
		emit(m.id, role, "revoked", token)
		m.resign(e, role)
		return
	}
	emit(m.id, role, "revoked", token)
	log.Printf("%s: role %s lost with the session", m.id, role)
}

func (m *member) resign(e *concurrency.Election, role string) {
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	if err := e.Resign(ctx); err != nil {
		log.Printf("%s: resign role %s: %v", m.id, role, err)
	}
}

func closeBounded(sess *concurrency.Session) {
	done := make(chan error, 1)
	go func() { done <- sess.Close() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Printf("session close (lease revoke): %v", err)
		}
	case <-time.After(stopGrace):
		log.Printf("session close (lease revoke) did not finish in %v", stopGrace)
	}
}

func waitBounded(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		log.Printf("roles did not all stop in %v", d)
	}
}

// sleep waits d unless ctx ends first; it reports whether the whole d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
