package elect.anchor.ratis;

import org.apache.ratis.RaftConfigKeys;
import org.apache.ratis.conf.Parameters;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.grpc.GrpcConfigKeys;
import org.apache.ratis.proto.RaftProtos.RoleInfoProto;
import org.apache.ratis.proto.RaftProtos.ServerRpcProto;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.GroupManagementRequest;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.protocol.SetConfigurationRequest;
import org.apache.ratis.protocol.TransferLeadershipRequest;
import org.apache.ratis.rpc.SupportedRpcType;
import org.apache.ratis.server.DivisionInfo;
import org.apache.ratis.server.RaftServer;
import org.apache.ratis.server.RaftServerConfigKeys;
import org.apache.ratis.server.storage.RaftStorage;
import org.apache.ratis.statemachine.StateMachine;
import org.apache.ratis.statemachine.TransactionContext;
import org.apache.ratis.statemachine.impl.BaseStateMachine;
import org.apache.ratis.util.SizeInBytes;
import org.apache.ratis.util.TimeDuration;

import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.ToIntFunction;

/**
 * One member of a multi-raft group built on Apache Ratis: one RaftServer per member hosts one Raft group
 * (division) per role, every member a peer of every group, all over one gRPC port. A division's state machine
 * prints {@code acquired} (token = the Raft term) when Ratis says its leadership is ready and {@code revoked}
 * when Ratis says it is no longer the leader.
 */
public final class Main {

    // ---- event lines on stdout -------------------------------------------------------------------------------

    private static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
        StandardCharsets.UTF_8);
    private static final Object OUT_LOCK = new Object();

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static void emit(String member, String role, String event, long token) {
        synchronized (OUT_LOCK) {
            // System.nanoTime() is CLOCK_MONOTONIC on Linux (HotSpot), the clock of Python's time.monotonic().
            double mono = System.nanoTime() / 1e9;
            Instant now = Instant.now();
            double ts = now.getEpochSecond() + now.getNano() / 1e9;
            OUT.print("{\"ts\": " + String.format("%.6f", ts) + ", \"mono\": " + String.format("%.6f", mono)
                + ", \"member\": " + quote(member) + ", \"role\": " + quote(role) + ", \"event\": " + quote(event)
                + ", \"token\": " + token + "}\n");
            OUT.flush();
        }
    }

    static void log(String msg) {
        System.err.println("ratis-anchor: " + msg);
        System.err.flush();
    }

    // ---- one role: the state machine of its Raft group ---------------------------------------------------------

    /**
     * The role's belief as printed. Ratis calls notifyLeaderReady on its apply thread, without the division's
     * lock, and notifyNotLeader from the step-down (under that lock): this object's own lock orders the two, and
     * an acquired line is always followed by a revoked line before the next one.
     */
    static final class Role extends BaseStateMachine {
        final String member;
        final String name;
        final RaftGroupId groupId;
        final Map<String, Integer> configured; // peer id -> the priority our balanced order gives it
        private boolean leading;
        private long token;
        private boolean closed;
        private long leadingSince; // System.nanoTime() of the acquired line
        final AtomicBoolean restoring = new AtomicBoolean(false);

        Role(String member, String name, RaftGroupId groupId, Map<String, Integer> configured) {
            this.member = member;
            this.name = name;
            this.groupId = groupId;
            this.configured = configured;
        }

        /** How long this member has led the role, in ms; -1 when it does not. */
        synchronized long ledForMs() {
            return leading && !closed ? TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - leadingSince) : -1;
        }

        /** This member's division of the role's group, or null before the server made it. */
        RaftServer.Division division() {
            CompletableFuture<RaftServer> server = getServer();
            if (!server.isDone()) {
                return null;
            }
            try {
                return server.join().getDivision(groupId);
            } catch (IOException | RuntimeException e) {
                return null;
            }
        }

        @Override
        public void notifyLeaderReady() {
            RaftServer.Division division = division();
            synchronized (this) {
                if (closed || division == null) {
                    return;
                }
                // The hook runs once the new leader's first entry (its configuration entry of the term) is
                // applied; the division may have stepped down in between, and then it is not ready any more.
                // The term is read before and after: unchanged, it is the term of the leadership found ready.
                DivisionInfo info = division.getInfo();
                long term = info.getCurrentTerm();
                if (!info.isLeaderReady() || info.getCurrentTerm() != term) {
                    log("role " + name + ": leader ready, but no longer leader; nothing printed");
                    return;
                }
                if (leading) {
                    if (term == token) {
                        return;
                    }
                    emit(member, name, "revoked", token); // not expected; keeps the printed history well-formed
                }
                leading = true;
                token = term;
                leadingSince = System.nanoTime();
                emit(member, name, "acquired", term);
            }
        }

        @Override
        public void notifyNotLeader(Collection<TransactionContext> pendingEntries) {
            // Ratis calls this when any leadership of the division ends, also one that never became ready
            // (nothing was announced then, and nothing is printed).
            synchronized (this) {
                log("role " + name + ": not leader" + (leading ? " (term " + token + ")" : " (never announced)"));
                if (leading && !closed) {
                    leading = false;
                    emit(member, name, "revoked", token);
                }
            }
        }

        @Override
        public void notifyServerShutdown(RoleInfoProto roleInfo, boolean allServer) {
            log("role " + name + ": division shut down (" + roleInfo.getRole() + ")");
        }

        /** After the server is down: print revoked if still leading, and print nothing more. */
        synchronized void finish() {
            if (leading && !closed) {
                leading = false;
                emit(member, name, "revoked", token);
            }
            closed = true;
        }
    }

    // ---- flags ----------------------------------------------------------------------------------------------

    private static final class Args {
        String id;
        List<String> roles = new ArrayList<>();
        String listen;
        LinkedHashMap<String, String> peers = new LinkedHashMap<>(); // id -> host:port (the others)
        int electionTimeoutMs = 1000;
        String dataDir;
        boolean join; // joining a running cluster: no group of its own until `admin change-peers` adds it
        Map<String, List<String>> priorities = null; // role -> ids, highest first
    }

    static void usage(String why) {
        System.err.println("ratis-anchor: " + why);
        System.err.println("usage: --id ID --roles 0,1,... --listen HOST:PORT --peers ID@HOST:PORT,... "
            + "--election-timeout-ms MS --data-dir DIR [--priorities \"0=m0>m1>m2;1=m1>m2>m0\"] [--join]");
        System.err.println("       admin change-peers --roles 0,1,... --peers ID@HOST:PORT,... --to ID@HOST:PORT,... "
            + "[--priorities ...] [--timeout-ms MS]");
        System.exit(2);
    }

    static List<String> split(String value, String sep) {
        List<String> out = new ArrayList<>();
        for (String part : value.split(sep)) {
            if (!part.isBlank()) {
                out.add(part.trim());
            }
        }
        return out;
    }

    /** "ID@HOST:PORT,..." as id -> HOST:PORT, in the order given. */
    static LinkedHashMap<String, String> parsePeers(String value) {
        LinkedHashMap<String, String> out = new LinkedHashMap<>();
        for (String p : split(value, ",")) {
            int at = p.indexOf('@');
            if (at <= 0) {
                usage("bad peer (want ID@HOST:PORT): " + p);
            }
            out.put(p.substring(0, at).trim(), p.substring(at + 1).trim());
        }
        return out;
    }

    /** "0=m0>m1>m2;1=..." as role -> ids, highest priority first. */
    static Map<String, List<String>> parsePriorities(String value) {
        Map<String, List<String>> out = new HashMap<>();
        for (String part : split(value, ";")) {
            int e = part.indexOf('=');
            if (e <= 0) {
                usage("bad priorities entry (want ROLE=ID>ID>...): " + part);
            }
            out.put(part.substring(0, e).trim(), split(part.substring(e + 1), ">"));
        }
        return out;
    }

    private static Args parse(String[] argv) {
        Args a = new Args();
        for (int i = 0; i < argv.length; i++) {
            String flag = argv[i];
            if (flag.equals("--join")) {
                a.join = true;
                continue;
            }
            String value;
            int eq = flag.indexOf('=');
            if (flag.startsWith("--") && eq > 0) {
                value = flag.substring(eq + 1);
                flag = flag.substring(0, eq);
            } else {
                if (i + 1 >= argv.length) {
                    usage("missing value for " + flag);
                }
                value = argv[++i];
            }
            switch (flag) {
                case "--id": a.id = value; break;
                case "--roles": a.roles = split(value, ","); break;
                case "--listen": a.listen = value; break;
                case "--peers": a.peers = parsePeers(value); break;
                case "--election-timeout-ms":
                    a.electionTimeoutMs = (int) Math.round(Double.parseDouble(value));
                    break;
                case "--data-dir": a.dataDir = value; break;
                case "--priorities": a.priorities = parsePriorities(value); break;
                default: usage("unknown flag " + flag);
            }
        }
        if (a.id == null || a.id.isEmpty()) usage("--id is required");
        if (a.roles.isEmpty()) usage("--roles is required");
        if (a.listen == null || a.listen.lastIndexOf(':') <= 0) usage("--listen HOST:PORT is required");
        if (a.dataDir == null) usage("--data-dir is required (a restarted member must reuse it)");
        if (a.electionTimeoutMs < 10) usage("--election-timeout-ms too small");
        return a;
    }

    /**
     * A member's Ratis priority in a role's group: Ratis only compares priorities (a voter refuses a candidate of
     * lower priority whose log is no longer than its own; a leader hands over to a caught-up follower of higher
     * priority), so the values only need the order: n for the first of n listed ids, down to 1 for the last, and
     * Ratis' default 0 for an id the role does not list (and for every member when there are no priorities).
     */
    static int priorityValue(List<String> order, String member) {
        int k = order.indexOf(member);
        return k < 0 ? 0 : order.size() - k;
    }

    /** A role's group id: a name-based UUID, the same on every member and across restarts. */
    static RaftGroupId groupId(String role) {
        return RaftGroupId.valueOf(UUID.nameUUIDFromBytes(("elect-" + role).getBytes(StandardCharsets.UTF_8)));
    }

    // ---- Ratis settings ---------------------------------------------------------------------------------------

    /** The server's properties; every timing is set from the detection budget D (README: "Knobs set from D"). */
    static RaftProperties properties(Args a, File data) {
        RaftProperties p = new RaftProperties();
        long d = a.electionTimeoutMs;
        RaftConfigKeys.Rpc.setType(p, SupportedRpcType.GRPC);
        int colon = a.listen.lastIndexOf(':');
        GrpcConfigKeys.Server.setHost(p, a.listen.substring(0, colon));
        GrpcConfigKeys.Server.setPort(p, Integer.parseInt(a.listen.substring(colon + 1)));
        RaftServerConfigKeys.setStorageDir(p, List.of(new File(data, "groups")));
        RaftServerConfigKeys.setRemovedGroupsDir(p, new File(data, "removed-groups"));

        // A follower's election timer and a candidate's wait for votes: uniform in [D, 2D] (Ratis' own default
        // is 150-300 ms, the same 1:2 ratio). The leader's heartbeat period follows as min/2 = D/2, and its
        // quorum check (step down when no majority answered within max = 2D) runs when its event queue has been
        // idle for max.
        RaftServerConfigKeys.Rpc.setTimeoutMin(p, TimeDuration.valueOf(d, TimeUnit.MILLISECONDS));
        RaftServerConfigKeys.Rpc.setTimeoutMax(p, TimeDuration.valueOf(2 * d, TimeUnit.MILLISECONDS));
        // The first election after start-up: the same range, set explicitly (unset, Ratis falls back to it).
        RaftServerConfigKeys.Rpc.setFirstElectionTimeoutMin(p, TimeDuration.valueOf(d, TimeUnit.MILLISECONDS));
        RaftServerConfigKeys.Rpc.setFirstElectionTimeoutMax(p, TimeDuration.valueOf(2 * d, TimeUnit.MILLISECONDS));
        // A leader whose JVM was stopped for longer than this steps down as soon as it runs again (Ratis'
        // JvmPauseMonitor), and a leader that stepped down for lack of a quorum stays out of elections this long.
        // Default 10 s; D ties both to the budget.
        RaftServerConfigKeys.LeaderElection.setLeaderStepDownWaitTime(p,
            TimeDuration.valueOf(d, TimeUnit.MILLISECONDS));
        RaftServerConfigKeys.LeaderElection.setPreVote(p, true); // the default, set explicitly
        // The documented lease read: a linearizable read is answered from the leader's lease (0.9 x min, the
        // default ratio). It only affects reads; the adapter issues none.
        RaftServerConfigKeys.Read.setOption(p, RaftServerConfigKeys.Read.Option.LINEARIZABLE);
        RaftServerConfigKeys.Read.setLeaderLeaseEnabled(p, true);
        RaftServerConfigKeys.Read.setLeaderLeaseTimeoutRatio(p, 0.9);

        // Footprint only (no timing): each group's log would allocate an 8 MB direct write buffer (which must
        // exceed the appender's 4 MB batch limit) and preallocate its segment file 4 MB at a time. The log here
        // holds a few small entries per leadership.
        RaftServerConfigKeys.Log.Appender.setBufferByteLimit(p, SizeInBytes.valueOf("32KB"));
        RaftServerConfigKeys.Log.setWriteBufferSize(p, SizeInBytes.valueOf("64KB"));
        RaftServerConfigKeys.Log.setPreallocatedSize(p, SizeInBytes.valueOf("64KB"));
        return p;
    }

    // ---- main -------------------------------------------------------------------------------------------------

    private static final AtomicBoolean STOPPING = new AtomicBoolean(false);
    private static final Object LIFECYCLE = new Object();
    private static final ClientId CLIENT = ClientId.randomId();
    private static final AtomicLong CALLS = new AtomicLong();
    private static final ExecutorService HANDOVER = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "handover");
        t.setDaemon(true);
        return t;
    });

    public static void main(String[] argv) throws Exception {
        if (argv.length > 0 && argv[0].equals("admin")) {
            System.exit(Admin.run(java.util.Arrays.copyOfRange(argv, 1, argv.length)));
        }
        Args a = parse(argv);

        Map<String, String> members = new LinkedHashMap<>(); // id -> host:port, this member first
        members.put(a.id, a.listen);
        for (Map.Entry<String, String> e : a.peers.entrySet()) {
            if (!e.getKey().equals(a.id)) {
                members.put(e.getKey(), e.getValue());
            }
        }

        File data = new File(a.dataDir);
        if (!data.isDirectory() && !data.mkdirs()) {
            usage("cannot create --data-dir " + a.dataDir);
        }

        Map<RaftGroupId, Role> byGroup = new LinkedHashMap<>();
        Map<RaftGroupId, RaftGroup> groups = new LinkedHashMap<>();
        for (String r : a.roles) {
            List<String> order = a.priorities == null ? List.of() : a.priorities.getOrDefault(r, List.of());
            List<RaftPeer> peers = new ArrayList<>();
            Map<String, Integer> configured = new HashMap<>();
            for (Map.Entry<String, String> m : members.entrySet()) {
                configured.put(m.getKey(), priorityValue(order, m.getKey()));
                peers.add(RaftPeer.newBuilder().setId(m.getKey()).setAddress(m.getValue())
                    .setPriority(configured.get(m.getKey())).build());
            }
            RaftGroupId gid = groupId(r);
            byGroup.put(gid, new Role(a.id, r, gid, configured));
            groups.put(gid, RaftGroup.valueOf(gid, peers));
        }
        List<Role> roles = new ArrayList<>(byGroup.values());

        // A restarted member finds its groups in the storage directory (Ratis recovers them while building the
        // server); the registry gives each its role's state machine, and a silent one to a group of no role.
        StateMachine.Registry registry = gid -> {
            Role role = byGroup.get(gid);
            return role != null ? role : new BaseStateMachine();
        };
        RaftServer server = RaftServer.newBuilder()
            .setServerId(RaftPeerId.valueOf(a.id))
            .setProperties(properties(a, data))
            .setParameters(new Parameters())
            .setStateMachineRegistry(registry)
            .setOption(RaftStorage.StartupOption.RECOVER)
            .build();

        // SIGTERM / SIGINT during start-up wait for it to finish (the stop takes the same lock), then stop.
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stop(a, server, roles));
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> stop(a, server, roles));

        synchronized (LIFECYCLE) {
            if (STOPPING.get()) {
                return;
            }
            try {
                server.start(); // the recovered groups, then the gRPC server (a taken port fails here)
            } catch (IOException | RuntimeException e) {
                log("server failed to start on " + a.listen + ": " + e);
                Runtime.getRuntime().halt(1);
            }
            Set<RaftGroupId> present = new HashSet<>();
            server.getGroupIds().forEach(present::add);
            for (Map.Entry<RaftGroupId, RaftGroup> g : groups.entrySet()) {
                // A joining member waits for `admin change-peers` to add each group to it (with the configuration
                // wanted) just before the leader adds it: started with a group of its own, it would campaign in a
                // configuration the voters do not have, and a voter's answer to that shuts the division down.
                if (present.contains(g.getKey()) || a.join) {
                    continue; // recovered from disk: its configuration is the one in its log
                }
                RaftClientReply reply = server.groupManagement(GroupManagementRequest.newAdd(CLIENT,
                    server.getId(), CALLS.incrementAndGet(), g.getValue(), false));
                if (!reply.isSuccess()) {
                    log("role " + byGroup.get(g.getKey()).name + ": group add failed: " + reply.getException());
                    Runtime.getRuntime().halt(1);
                }
            }

            StringBuilder url = new StringBuilder("ratis://" + a.id + "@" + a.listen + "?peers=");
            boolean first = true;
            for (Map.Entry<String, String> m : members.entrySet()) {
                if (!m.getKey().equals(a.id)) {
                    url.append(first ? "" : ",").append(m.getKey()).append('@').append(m.getValue());
                    first = false;
                }
            }
            url.append("&election_timeout_ms=").append(a.electionTimeoutMs);
            System.err.println("elect member: " + a.id + " started on " + url);
            System.err.flush();
            ScheduledExecutorService restorer = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "restore-priorities");
                t.setDaemon(true);
                return t;
            });
            restorer.scheduleWithFixedDelay(() -> {
                try {
                    restorePriorities(server, roles, a.electionTimeoutMs);
                } catch (RuntimeException e) { // else the executor drops the task without a word
                    log("restoring priorities: " + e);
                }
            }, a.electionTimeoutMs, a.electionTimeoutMs, TimeUnit.MILLISECONDS);
        }

        new CountDownLatch(1).await(); // the signal handler ends the process
    }

    /**
     * Put back the priorities our balanced order gave a group, once this member has led it for 3D (the hysteresis
     * raft:// rebalances after): a graceful stop raised its target's priority in the group's configuration (the
     * only way Ratis transfers to it), and left as it is, the stopped member, back, would tie with it and get
     * nothing back (a leader yields only to a strictly higher priority). By 3D the member that stopped has
     * exited; once restored, Ratis' own yield hands the group back when that member returns and catches up.
     */
    private static void restorePriorities(RaftServer server, List<Role> roles, int electionTimeoutMs) {
        if (STOPPING.get()) {
            return;
        }
        for (Role role : roles) {
            RaftServer.Division division = role.division();
            if (division == null || role.ledForMs() < 3L * electionTimeoutMs || role.restoring.get()) {
                continue;
            }
            Collection<RaftPeer> current = division.getRaftConf().getCurrentPeers();
            ToIntFunction<RaftPeer> want = p -> role.configured.getOrDefault(p.getId().toString(), p.getPriority());
            if (current.stream().allMatch(p -> want.applyAsInt(p) == p.getPriority())
                    || !role.restoring.compareAndSet(false, true)) {
                continue;
            }
            try {
                configure(server, role.groupId, withPriorities(current, want)).whenComplete((reply, e) -> {
                        role.restoring.set(false);
                        log("role " + role.name + ": priorities restored: " + (e != null ? e
                            : reply.isSuccess() ? "done" : String.valueOf(reply.getException())));
                    });
            } catch (IOException | RuntimeException e) {
                role.restoring.set(false);
                log("role " + role.name + ": restoring priorities: " + e);
            }
        }
    }

    /** Graceful stop: hand each led group to its best live peer, close the server, exit 0. */
    private static void stop(Args a, RaftServer server, List<Role> roles) {
        if (!STOPPING.compareAndSet(false, true)) {
            return;
        }
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(Math.max(5000, 3L * a.electionTimeoutMs + 3000));
            } catch (InterruptedException e) {
                return;
            }
            log("graceful stop took too long; exiting");
            for (Role role : roles) {
                role.finish();
            }
            OUT.flush();
            Runtime.getRuntime().halt(0);
        }, "stop-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        synchronized (LIFECYCLE) {
            stopStarted(a, server, roles);
        }
    }

    private static void stopStarted(Args a, RaftServer server, List<Role> roles) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(a.electionTimeoutMs + 500L);
        // 1. Leadership transfer, the way Ratis' own shell does it: lift the target to the highest priority in
        //    the group's configuration if it is below it (Ratis refuses to transfer to anyone else), then
        //    transferLeadership. The leader leads until the target's election reaches it (revoked then).
        List<Role> transferring = new ArrayList<>();
        for (Role role : roles) {
            RaftServer.Division division = role.division();
            if (division == null || !division.getInfo().isLeader()) {
                continue;
            }
            RaftPeer target = chooseTarget(division, a.electionTimeoutMs);
            if (target == null) {
                log("role " + role.name + ": no live peer to hand over to");
                continue;
            }
            handOver(server, division, target, a.electionTimeoutMs).whenComplete((reply, e) -> log("role "
                + role.name + ": transfer to " + target.getId() + ": " + (e != null ? e
                : reply.isSuccess() ? "done" : String.valueOf(reply.getException()))));
            transferring.add(role);
        }
        // 2. Wait (bounded) until each of those groups has another leader.
        for (Role role : transferring) {
            RaftServer.Division division = role.division();
            while (System.nanoTime() < deadline && division != null) {
                RaftPeerId leader = division.getInfo().getLeaderId();
                if (!division.getInfo().isLeader() && leader != null && !leader.equals(server.getId())) {
                    break;
                }
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    break;
                }
            }
        }
        // 3. Close the server: a division that still leads ends its leadership (notifyNotLeader: revoked).
        try {
            server.close();
        } catch (IOException | RuntimeException e) {
            log("server close: " + e);
        }
        for (Role role : roles) {
            role.finish();
        }
        OUT.flush();
        log("stopped");
        Runtime.getRuntime().halt(0);
    }

    /**
     * The highest-priority peer (in the group's current configuration) the leader heard from within the longest
     * election timeout (2D), the first found of equal ones; null when none was heard from.
     */
    private static RaftPeer chooseTarget(RaftServer.Division division, int electionTimeoutMs) {
        RoleInfoProto info = division.getInfo().getRoleInfoProto();
        if (!info.hasLeaderInfo()) {
            return null;
        }
        RaftPeer best = null;
        for (ServerRpcProto f : info.getLeaderInfo().getFollowerInfoList()) {
            if (f.getLastRpcElapsedTimeMs() > 2L * electionTimeoutMs) {
                continue;
            }
            RaftPeer peer = division.getRaftConf().getPeer(RaftPeerId.valueOf(f.getId().getId()));
            if (peer != null && (best == null || peer.getPriority() > best.getPriority())) {
                best = peer;
            }
        }
        return best;
    }

    /** The group's peers as they are, each with the priority `priority` gives it. */
    private static List<RaftPeer> withPriorities(Collection<RaftPeer> current, ToIntFunction<RaftPeer> priority) {
        List<RaftPeer> peers = new ArrayList<>();
        for (RaftPeer p : current) {
            int want = priority.applyAsInt(p);
            peers.add(want == p.getPriority() ? p : RaftPeer.newBuilder(p).setPriority(want).build());
        }
        return peers;
    }

    /** Ask the group's leader (this server) to change the group's configuration to `peers`. */
    private static CompletableFuture<RaftClientReply> configure(RaftServer server, RaftGroupId gid,
                                                                List<RaftPeer> peers) throws IOException {
        return server.setConfigurationAsync(new SetConfigurationRequest(CLIENT, server.getId(), gid,
            CALLS.incrementAndGet(), peers));
    }

    /** Raise the target's priority to the group's highest if it is lower, then transfer leadership to it. */
    private static CompletableFuture<RaftClientReply> handOver(RaftServer server, RaftServer.Division division,
                                                               RaftPeer target, int timeoutMs) {
        RaftGroupId gid = division.getMemberId().getGroupId();
        Collection<RaftPeer> current = division.getRaftConf().getCurrentPeers();
        int highest = current.stream().mapToInt(RaftPeer::getPriority).max().orElse(0);
        CompletableFuture<RaftClientReply> lifted;
        if (target.getPriority() >= highest) {
            lifted = CompletableFuture.completedFuture(null);
        } else {
            try {
                lifted = configure(server, gid, withPriorities(current,
                    p -> p.getId().equals(target.getId()) ? highest : p.getPriority()));
            } catch (IOException e) {
                return CompletableFuture.<RaftClientReply>failedFuture(e);
            }
        }
        // Not on the thread that completes `lifted`: that is the division's event processor, holding the
        // division's lock, which transferLeadershipAsync waits for.
        return lifted.thenComposeAsync(reply -> {
            if (reply != null && !reply.isSuccess()) {
                return CompletableFuture.completedFuture(reply);
            }
            try {
                return server.transferLeadershipAsync(new TransferLeadershipRequest(CLIENT, server.getId(), gid,
                    CALLS.incrementAndGet(), target.getId(), timeoutMs));
            } catch (IOException e) {
                return CompletableFuture.<RaftClientReply>failedFuture(e);
            }
        }, HANDOVER);
    }
}
