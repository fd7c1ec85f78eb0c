// Command goneli is the elect bench adapter for goNELI (github.com/obsidiandynamics/goneli): one member
// process that contends for several roles, one goNELI instance per role (group "<group>-<role>", leader
// topic "<topic>-<role>"), and prints one JSON line per leadership event on stdout.
//
// Everything elected here is elected by goNELI itself; this program only configures it, pulses it from an
// application loop, turns its barrier events into event lines and closes it on SIGTERM / SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/obsidiandynamics/goneli"
	"github.com/obsidiandynamics/libstdgo/scribe"
	"golang.org/x/sys/unix"
	"gopkg.in/confluentinc/confluent-kafka-go.v1/kafka"
)

// ---------------------------------------------------------------------------------------------------------
// Clocks and event lines.

// mono is CLOCK_MONOTONIC in seconds: the clock of Python's time.monotonic().
func mono() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

func wall() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}

type eventLine struct {
	TS     float64  `json:"ts"`
	Mono   float64  `json:"mono"`
	Member string   `json:"member"`
	Role   string   `json:"role"`
	Event  string   `json:"event"`
	Token  int64    `json:"token"`
	Until  *float64 `json:"until,omitempty"`
}

// out writes event lines to stdout, one write per line, nothing else ever goes to stdout.
type out struct {
	mu     sync.Mutex
	member string
}

func (o *out) emit(role, event string, at float64, until *float64) {
	line := eventLine{TS: wall(), Mono: at, Member: o.member, Role: role, Event: event, Token: 0, Until: until}
	b, err := json.Marshal(line)
	if err != nil {
		panic(err)
	}
	b = append(b, '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = os.Stdout.Write(b) // os.Stdout is unbuffered: the line is out when Write returns
}

// ---------------------------------------------------------------------------------------------------------
// Knobs.

type knobs struct {
	defaults         bool
	budget           time.Duration
	heartbeatTimeout *time.Duration // goneli.Config.HeartbeatTimeout (goNELI sets session.timeout.ms = 3x this)
	minPollInterval  *time.Duration // goneli.Config.MinPollInterval
	pollDuration     *time.Duration // goneli.Config.PollDuration
	kafka            goneli.KafkaConfigMap
}

// goNELI's own defaults (v0.4.3): HeartbeatTimeout 5 s, MinPollInterval 100 ms, PollDuration 1 ms, so a
// leader sends 50 heartbeats per HeartbeatTimeout. With a budget, a leader sends pollRatio heartbeats per
// HeartbeatTimeout (at D = 1 s: one every 33.3 ms), unless --min-poll-interval says otherwise: goNELI's
// 50 (6.7 ms at D = 1 s) queued ProduceRequests on a shared 2-core machine until they outlived
// delivery.timeout.ms and leaders fenced themselves.
const pollRatio = 10

func makeKnobs(defaults bool, budget float64, minPoll time.Duration) knobs {
	k := knobs{defaults: defaults, kafka: goneli.KafkaConfigMap{}}
	if defaults {
		return k
	}
	k.budget = time.Duration(budget * float64(time.Second))
	// goNELI derives session.timeout.ms = 3 x HeartbeatTimeout (whole milliseconds) and refuses a
	// session.timeout.ms of ours, so HeartbeatTimeout = D/3 rounded to the millisecond.
	htMs := int64(math.Round(budget * 1000 / 3))
	if htMs < 1 {
		htMs = 1
	}
	ht := time.Duration(htMs) * time.Millisecond
	mpi := ht / pollRatio
	if minPoll > 0 {
		mpi = minPoll
	}
	if mpi < time.Millisecond {
		mpi = time.Millisecond
	}
	pd := goneli.DefaultPollDuration
	k.heartbeatTimeout, k.minPollInterval, k.pollDuration = &ht, &mpi, &pd
	sessionMs := int(htMs) * 3
	hbMs := int(math.Round(budget * 1000 / 3))
	if hbMs < 1 {
		hbMs = 1
	}
	k.kafka["heartbeat.interval.ms"] = hbMs
	// librdkafka requires max.poll.interval.ms >= session.timeout.ms: an application loop that stops
	// pulsing is noticed in D as well.
	k.kafka["max.poll.interval.ms"] = sessionMs
	return k
}

func (k knobs) describe() string {
	if k.defaults {
		return "goNELI defaults: HeartbeatTimeout=5s (session.timeout.ms=15000), MinPollInterval=100ms, " +
			"PollDuration=1ms, delivery.timeout.ms=5000, heartbeat.interval.ms and max.poll.interval.ms librdkafka's"
	}
	return fmt.Sprintf("budget %v: HeartbeatTimeout=%v (session.timeout.ms=%d, delivery.timeout.ms=%d), "+
		"MinPollInterval=%v, PollDuration=%v, heartbeat.interval.ms=%v, max.poll.interval.ms=%v",
		k.budget, *k.heartbeatTimeout, k.heartbeatTimeout.Milliseconds()*3, k.heartbeatTimeout.Milliseconds(),
		*k.minPollInterval, *k.pollDuration, k.kafka["heartbeat.interval.ms"], k.kafka["max.poll.interval.ms"])
}

// ---------------------------------------------------------------------------------------------------------
// One role: one goNELI instance, its barrier and its application loop.

type role struct {
	name    string
	group   string
	topic   string
	member  string
	out     *out
	knobs   knobs
	boot    string
	logs    scribe.Scribe
	started chan struct{} // closed once the first goNELI instance is up
	once    sync.Once

	mu      sync.Mutex
	leading bool
}

// barrier receives goNELI's events. goNELI calls it from inside Pulse (the rebalance callback runs in the
// consumer poll), so it runs on this role's application loop. It returns at once: there is no in-flight
// leader work to wind up, so a LeaderRevoked does not hold the successor back.
func (r *role) barrier(e goneli.Event) {
	at := mono()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.(type) {
	case goneli.LeaderAcquired:
		if r.leading {
			log.Printf("role %s: %v while already leading: not printed", r.name, e)
			return
		}
		r.leading = true
		r.out.emit(r.name, "acquired", at, nil)
	case goneli.LeaderRevoked:
		if !r.leading {
			// After a LeaderFenced (leadership had already ended), or during Close (the adapter printed
			// revoked when it stopped pulsing, before closing goNELI).
			log.Printf("role %s: %v while not leading: not printed", r.name, e)
			return
		}
		r.leading = false
		r.out.emit(r.name, "revoked", at, nil)
	case goneli.LeaderFenced:
		if !r.leading {
			log.Printf("role %s: %v while not leading: not printed", r.name, e)
			return
		}
		r.leading = false
		until := at // goNELI does not expose when its last heartbeat arrived: the event's own time
		r.out.emit(r.name, "fenced", at, &until)
	default:
		log.Printf("role %s: unknown goNELI event %v (%T)", r.name, e, e)
	}
}

// giveUp ends leadership as the application's own act (shutdown or a fatal error), before goNELI is closed.
func (r *role) giveUp() {
	at := mono()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leading {
		r.leading = false
		r.out.emit(r.name, "revoked", at, nil)
	}
}

func (r *role) config() goneli.Config {
	// No client.id: librdkafka's default ("rdkafka") is the same in every member, so the classic group's
	// assignor (which gives partition 0 to the first member id in order, client.id + "-" + a UUID) picks
	// a random member per role rather than the member whose id sorts first.
	kc := goneli.KafkaConfigMap{"bootstrap.servers": r.boot}
	for k, v := range r.knobs.kafka {
		kc[k] = v
	}
	return goneli.Config{
		KafkaConfig:      kc,
		LeaderTopic:      r.topic,
		LeaderGroupID:    r.group,
		Scribe:           r.logs,
		Name:             r.member,
		PollDuration:     r.knobs.pollDuration,
		MinPollInterval:  r.knobs.minPollInterval,
		HeartbeatTimeout: r.knobs.heartbeatTimeout,
	}
}

// run is the application loop: create goNELI, pulse it for as long as the process runs, and when it
// fails, close it and start a new instance (keep contending, as a user's loop would).
func (r *role) run(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		n, err := goneli.New(r.config(), r.barrier)
		if err != nil {
			log.Printf("role %s: goneli.New: %v", r.name, err)
			sleepCtx(ctx, backoff)
			continue
		}
		r.once.Do(func() { close(r.started) })
		err = r.pulse(ctx, n)
		if err != nil {
			log.Printf("role %s: Pulse: %v: closing this goNELI instance and starting another", r.name, err)
		}
		r.giveUp()
		t0 := time.Now()
		if cerr := n.Close(); cerr != nil {
			log.Printf("role %s: Close: %v", r.name, cerr)
		}
		log.Printf("role %s: goNELI closed in %v", r.name, time.Since(t0).Round(time.Millisecond))
		if err != nil {
			sleepCtx(ctx, backoff)
		}
	}
}

// pulse calls PulseCtx in a loop, as goNELI asks: as a standby it blocks inside PulseCtx (which polls
// every MinPollInterval) until it leads or the window ends; as the leader PulseCtx returns at once, and
// the loop waits until the next poll is due (goNELI's Deadline) before pulsing again.
func (r *role) pulse(ctx context.Context, n goneli.Neli) error {
	const window = time.Second // bounds one PulseCtx call (goNELI defers a timer per wait inside it)
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, window)
		isLeader, err := n.PulseCtx(wctx)
		cancel()
		if err != nil {
			return err
		}
		if isLeader {
			// The leader's work would go here; this adapter has none.
			wait := n.Deadline().Remaining()
			if wait < 100*time.Microsecond {
				wait = 100 * time.Microsecond
			}
			sleepCtx(ctx, wait)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// ---------------------------------------------------------------------------------------------------------
// Leader topics: goNELI subscribes to its topic but does not create it (the brokers here do not
// auto-create topics), so the member creates each role's topic with one partition, as a user would.

func ensureTopics(ctx context.Context, boot string, topics []string, replication int) error {
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": boot})
	if err != nil {
		return err
	}
	defer admin.Close()
	for {
		err = createTopics(ctx, admin, topics, replication)
		if err == nil {
			return nil
		}
		log.Printf("leader topics: %v (retrying)", err)
		sleepCtx(ctx, time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func createTopics(ctx context.Context, admin *kafka.AdminClient, topics []string, replication int) error {
	md, err := admin.GetMetadata(nil, true, 5000)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	rf := replication
	if rf <= 0 {
		rf = len(md.Brokers)
		if rf > 3 {
			rf = 3
		}
	}
	var missing []kafka.TopicSpecification
	for _, t := range topics {
		if _, ok := md.Topics[t]; !ok {
			missing = append(missing, kafka.TopicSpecification{Topic: t, NumPartitions: 1, ReplicationFactor: rf})
		}
	}
	if len(missing) > 0 {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		res, err := admin.CreateTopics(cctx, missing, kafka.SetAdminOperationTimeout(10*time.Second))
		if err != nil {
			return fmt.Errorf("create topics: %w", err)
		}
		for _, tr := range res {
			if c := tr.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
				return fmt.Errorf("create topic %s: %v", tr.Topic, tr.Error)
			}
		}
	}
	// Wait until every topic's partition 0 has a leader before subscribing.
	for {
		md, err := admin.GetMetadata(nil, true, 5000)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		ready := true
		for _, t := range topics {
			tm, ok := md.Topics[t]
			if !ok || tm.Error.Code() != kafka.ErrNoError || len(tm.Partitions) == 0 || tm.Partitions[0].Leader < 0 {
				ready = false
			}
		}
		if ready {
			return nil
		}
		sleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// ---------------------------------------------------------------------------------------------------------

func main() {
	id := flag.String("id", "", "member id")
	roles := flag.String("roles", "", "roles this member contends for, comma-separated")
	boot := flag.String("bootstrap", "", "Kafka bootstrap servers host:port,...")
	group := flag.String("group", "elect", "base group id: role R uses consumer group <group>-R")
	topic := flag.String("topic", "", "base leader topic: role R uses <topic>-R (empty: goNELI's own default <group>-R.neli)")
	budget := flag.Float64("budget", 0, "detection budget D in seconds (sets goNELI's and the consumer's failure-detection knobs)")
	defaults := flag.Bool("defaults", false, "run with goNELI's own defaults, ignoring --budget")
	replication := flag.Int("replication", 0, "replication factor of the leader topics it creates (0: the broker count, at most 3)")
	level := flag.String("log-level", "Info", "goNELI log level on stderr: Trace, Debug, Info, Warn, Error, Off")
	minPoll := flag.Duration("min-poll-interval", 0, "with --budget: goNELI's MinPollInterval (0: HeartbeatTimeout/10)")
	kdebug := flag.String("kafka-debug", "", "librdkafka debug contexts for goNELI's clients (its 'debug' property), logged on stderr")
	flag.Parse()

	log.SetOutput(os.Stderr)
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("[goneli %s] ", *id))

	fail := func(format string, args ...interface{}) {
		fmt.Fprintf(os.Stderr, "goneli: "+format+"\n", args...)
		os.Exit(2)
	}
	if *id == "" || strings.Contains(*id, "%") {
		fail("--id is required and may not contain %%")
	}
	if *boot == "" {
		fail("--bootstrap is required")
	}
	if !*defaults && *budget <= 0 {
		fail("give --budget SECONDS or --defaults")
	}
	var names []string
	for _, r := range strings.Split(*roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			names = append(names, r)
		}
	}
	if len(names) == 0 {
		fail("--roles is required")
	}
	lvl, err := scribe.ParseLevelName(*level)
	if err != nil {
		fail("--log-level: %v", err)
	}

	k := makeKnobs(*defaults, *budget, *minPoll)
	if *kdebug != "" {
		k.kafka["debug"] = *kdebug
	}
	logs := scribe.New(scribe.StandardBinding())
	logs.SetEnabled(lvl.Level)
	o := &out{member: *id}

	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		log.Printf("%v: closing goNELI", s)
		cancel()
	}()

	var rs []*role
	var topics []string
	for _, name := range names {
		g := *group + "-" + name
		t := *topic + "-" + name
		if *topic == "" {
			t = g + ".neli" // goNELI's own default leader topic for a group id
		}
		if goneli.Sanitise(g) != g || goneli.Sanitise(t) != t {
			fail("role %q gives group %q / topic %q: only [a-zA-Z0-9._-] are allowed", name, g, t)
		}
		rs = append(rs, &role{name: name, group: g, topic: t, member: *id, out: o, knobs: k, boot: *boot,
			logs: logs, started: make(chan struct{})})
		topics = append(topics, t)
	}
	_, libv := kafka.LibraryVersion()
	log.Printf("goNELI v0.4.3, librdkafka %s (%s); %s; %d roles", libv, kafka.LibrdkafkaLinkInfo, k.describe(), len(rs))

	if err := ensureTopics(ctx, *boot, topics, *replication); err != nil {
		if errors.Is(err, context.Canceled) {
			os.Exit(0)
		}
		fail("leader topics: %v", err)
	}

	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func(r *role) {
			defer wg.Done()
			r.run(ctx)
		}(r)
	}
	for _, r := range rs {
		select {
		case <-r.started:
		case <-ctx.Done():
		}
	}
	if ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "elect member: %s started on goneli://%s\n", *id, *boot)
	}

	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		log.Printf("closed")
	case <-time.After(8 * time.Second):
		buf := make([]byte, 1<<20)
		log.Printf("goNELI did not close within 8 s: exiting anyway; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
	}
	os.Exit(0)
}
