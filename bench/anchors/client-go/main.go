// Command client-go-election runs one member of the client-go anchor: Kubernetes' own leader election
// (k8s.io/client-go/tools/leaderelection with a LeaseLock), one LeaderElector per role, with the event
// lines of the elect adapter contract on stdout.
//
// Role r's lock is the Lease PREFIX-r in the namespace (the name kubernetes:// gives a numbered role, so
// both can be pointed at the same Lease). ReleaseOnCancel is on, as client-go's docs advise for a clean
// handover. A leadership ends when client-go says so (OnStoppedLeading: its renewals failed for RenewDeadline),
// or on SIGTERM before client-go releases the Lease: ReleaseOnCancel asks the caller to stop its work before it
// cancels, and a line printed after the release could follow the next holder's. The token is the Lease's
// leaseTransitions, read once leadership started.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

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

// emit writes one event line to stdout at once.
func emit(member, role, what string, token int64) {
	outMu.Lock()
	defer outMu.Unlock()
	now := time.Now()
	line, _ := json.Marshal(event{TS: float64(now.UnixNano()) / 1e9, Mono: monotonic(), Member: member,
		Role: role, Event: what, Token: token})
	if _, err := os.Stdout.Write(append(line, '\n')); err != nil {
		log.Printf("stdout: %v", err)
	}
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("client-go-election: ")
	klog.SetOutput(os.Stderr)

	id := flag.String("id", "", "member id: the Lease's holderIdentity (required)")
	rolesFlag := flag.String("roles", "", "comma-separated roles (required)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (required)")
	namespace := flag.String("namespace", "default", "the Leases' namespace")
	prefix := flag.String("prefix", "elect-anchor", "role r's Lease is PREFIX-r")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "LeaseDuration (written as whole seconds)")
	renewDeadline := flag.Duration("renew-deadline", 10*time.Second, "RenewDeadline")
	retryPeriod := flag.Duration("retry-period", 2*time.Second, "RetryPeriod")
	flag.Parse()
	if *id == "" || *rolesFlag == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "client-go-election: --id, --roles and --kubeconfig are required")
		flag.Usage()
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig %s: %v", *kubeconfig, err)
	}
	config.QPS, config.Burst = 1000, 1000 // the rate limiter is not what is measured
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	root, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ends []func() // per role: stop leading (print it) before the release

	var wg sync.WaitGroup
	for _, role := range strings.Split(*rolesFlag, ",") {
		role = strings.TrimSpace(role)
		if role == "" {
			continue
		}
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: *prefix + "-" + role, Namespace: *namespace},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: *id},
		}
		var mu sync.Mutex
		var leading, stopping bool
		var token int64
		ends = append(ends, func() {
			mu.Lock()
			defer mu.Unlock()
			stopping = true
			if leading {
				leading = false
				emit(*id, role, "revoked", token)
			}
		})
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: *leaseDuration, RenewDeadline: *renewDeadline, RetryPeriod: *retryPeriod,
			ReleaseOnCancel: true, Name: role,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					record, _, err := lock.Get(ctx) // the token: client-go does not hand it to the callback
					mu.Lock()
					defer mu.Unlock()
					if stopping {
						return // it releases at once
					}
					token = 0
					if err == nil {
						token = int64(record.LeaderTransitions)
					}
					leading = true
					emit(*id, role, "acquired", token)
				},
				OnStoppedLeading: func() {
					mu.Lock()
					defer mu.Unlock()
					if leading {
						leading = false
						emit(*id, role, "revoked", token)
					}
				},
			},
		})
		if err != nil {
			log.Fatalf("role %s: %v", role, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for root.Err() == nil { // Run returns when leadership is lost: contend again
				elector.Run(root)
			}
		}()
	}
	fmt.Fprintf(os.Stderr, "elect member: %s started on client-go://%s\n", *id, config.Host)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	for _, end := range ends {
		end()
	}
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		log.Printf("roles did not all stop in 5s")
	}
	log.Printf("%s stopped", *id)
}
