package elect.anchor.jraft;

import com.alipay.sofa.jraft.Iterator;
import com.alipay.sofa.jraft.Node;
import com.alipay.sofa.jraft.RaftGroupService;
import com.alipay.sofa.jraft.Status;
import com.alipay.sofa.jraft.conf.Configuration;
import com.alipay.sofa.jraft.core.ElectionPriority;
import com.alipay.sofa.jraft.core.StateMachineAdapter;
import com.alipay.sofa.jraft.entity.PeerId;
import com.alipay.sofa.jraft.error.RaftException;
import com.alipay.sofa.jraft.option.NodeOptions;
import com.alipay.sofa.jraft.option.RaftOptions;
import com.alipay.sofa.jraft.option.ReadOnlyOption;
import com.alipay.sofa.jraft.rpc.RaftRpcServerFactory;
import com.alipay.sofa.jraft.rpc.RpcServer;
import com.alipay.sofa.jraft.storage.impl.RocksDBLogStorage;
import com.alipay.sofa.jraft.storage.snapshot.SnapshotReader;
import com.alipay.sofa.jraft.storage.snapshot.SnapshotWriter;
import com.alipay.sofa.jraft.util.Endpoint;
import com.alipay.sofa.jraft.util.StorageOptionsFactory;

import java.io.File;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One member of a multi-raft group built on SOFAJRaft: one Raft group per role (partition), every member a peer
 * of every group, all groups sharing one RPC server. Each group's leader prints {@code acquired} (token = the
 * Raft term) from the state machine's onLeaderStart and {@code revoked} from onLeaderStop.
 */
public final class Main {

    // ---- event lines on stdout -------------------------------------------------------------------------------

    private static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
        StandardCharsets.UTF_8);
    private static final Object OUT_LOCK = new Object();

    private static String jsonString(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
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
                + ", \"member\": " + jsonString(member) + ", \"role\": " + jsonString(role) + ", \"event\": "
                + jsonString(event) + ", \"token\": " + token + "}\n");
            OUT.flush();
        }
    }

    static void log(String msg) {
        System.err.println("jraft-anchor: " + msg);
        System.err.flush();
    }

    // ---- one role: its Raft group's state machine ----------------------------------------------------------

    /** The role's belief as printed: an acquired line is always followed by a revoked line before the next one. */
    static final class Role extends StateMachineAdapter {
        final String member;
        final String name;
        final List<String> order; // member ids, highest priority first (empty: no priorities)
        RaftGroupService service;
        Node node;
        private boolean leading;
        private long token;
        private boolean closed;

        Role(String member, String name, List<String> order) {
            this.member = member;
            this.name = name;
            this.order = order;
        }

        synchronized boolean isLeading() {
            return leading;
        }

        @Override
        public void onApply(Iterator iter) {
            // No commands are ever proposed; only the leaders' configuration entries pass through the log.
            while (iter.hasNext()) {
                iter.next();
            }
        }

        @Override
        public synchronized void onLeaderStart(long term) {
            if (closed) {
                return;
            }
            if (leading) {
                // Not expected from the library; keep the printed history well-formed all the same.
                emit(member, name, "revoked", token);
            }
            leading = true;
            token = term;
            emit(member, name, "acquired", term);
        }

        @Override
        public synchronized void onLeaderStop(Status status) {
            // The library also calls this for a leader whose first entry never committed (no onLeaderStart):
            // nothing was announced then, and nothing is printed.
            log("role " + name + ": leader stop" + (leading ? " (term " + token + ")" : " (never announced)") + ": "
                + status);
            if (leading && !closed) {
                leading = false;
                emit(member, name, "revoked", token);
            }
        }

        /** After the node is down: print revoked if still leading, and print nothing more. */
        synchronized void close() {
            if (leading && !closed) {
                leading = false;
                emit(member, name, "revoked", token);
            }
            closed = true;
        }

        @Override
        public void onError(RaftException e) {
            log("role " + name + ": raft error: " + e);
        }

        @Override
        public void onSnapshotSave(SnapshotWriter writer, com.alipay.sofa.jraft.Closure done) {
            // The state machine holds nothing: an empty snapshot lets the log be truncated.
            done.run(Status.OK());
        }

        @Override
        public boolean onSnapshotLoad(SnapshotReader reader) {
            return true;
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
        Map<String, List<String>> priorities = null; // role -> ids, highest first
        boolean join; // start with an empty configuration: a running group's leader adds this member
    }

    static void usage(String why) {
        System.err.println("jraft-anchor: " + why);
        System.err.println("usage: --id ID --roles 0,1,... --listen HOST:PORT --peers ID@HOST:PORT,... "
            + "--election-timeout-ms MS --data-dir DIR [--priorities \"0=m0>m1>m2;1=m1>m2>m0\"] [--join]");
        System.err.println("       admin change-peers --roles 0,1,... --peers ID@HOST:PORT,... --to ID@HOST:PORT,... "
            + "[--priorities ...] [--timeout-ms MS]");
        System.exit(2);
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
                case "--roles":
                    for (String r : value.split(",")) {
                        if (!r.isBlank()) {
                            a.roles.add(r.trim());
                        }
                    }
                    break;
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
        if (a.listen == null) usage("--listen is required");
        if (a.dataDir == null) usage("--data-dir is required (a restarted member must reuse it)");
        if (a.electionTimeoutMs < 10) usage("--election-timeout-ms too small");
        return a;
    }

    /** "ID@HOST:PORT,..." as id -> HOST:PORT, in the order given. */
    static LinkedHashMap<String, String> parsePeers(String value) {
        LinkedHashMap<String, String> out = new LinkedHashMap<>();
        for (String p : value.split(",")) {
            if (p.isBlank()) {
                continue;
            }
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
        for (String part : value.split(";")) {
            if (part.isBlank()) {
                continue;
            }
            int e = part.indexOf('=');
            if (e <= 0) {
                usage("bad priorities entry (want ROLE=ID>ID>...): " + part);
            }
            List<String> ids = new ArrayList<>();
            for (String m : part.substring(e + 1).split(">")) {
                if (!m.isBlank()) {
                    ids.add(m.trim());
                }
            }
            out.put(part.substring(0, e).trim(), ids);
        }
        return out;
    }

    /** A member's priority value in a role: by its place in the role's order; Disabled without priorities. */
    static int priorityOf(Map<String, List<String>> priorities, String role, String member) {
        if (priorities == null) {
            return ElectionPriority.Disabled;
        }
        List<String> order = priorities.getOrDefault(role, List.of());
        if (order.isEmpty()) {
            return ElectionPriority.Disabled;
        }
        int k = order.indexOf(member);
        return k < 0 ? ElectionPriority.MinValue : priorityValue(k);
    }

    static Endpoint endpoint(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0) {
            usage("bad address (want HOST:PORT): " + hostPort);
        }
        return new Endpoint(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }

    /**
     * The k-th priority value (k = 0 highest). The values follow SOFAJRaft's own decay of a follower's target
     * priority (target -= max(10, target / 5) after two election timeouts without a leader), starting at 100, so
     * each decay step lets exactly the next member in the order stand: 100, 80, 64, 52, 42, 32, 22, 12, 2, then 1.
     */
    static int priorityValue(int k) {
        int p = 100;
        for (int i = 0; i < k; i++) {
            p = Math.max(ElectionPriority.MinValue, p - Math.max(10, p / 5));
        }
        return p;
    }

    // ---- main -------------------------------------------------------------------------------------------------

    private static final AtomicBoolean STOPPING = new AtomicBoolean(false);
    private static final Object LIFECYCLE = new Object();

    public static void main(String[] argv) throws Exception {
        if (argv.length > 0 && argv[0].equals("admin")) {
            System.exit(Admin.run(java.util.Arrays.copyOfRange(argv, 1, argv.length)));
        }
        Args a = parse(argv);

        Map<String, Endpoint> members = new LinkedHashMap<>();
        members.put(a.id, endpoint(a.listen));
        for (Map.Entry<String, String> e : a.peers.entrySet()) {
            if (e.getKey().equals(a.id)) {
                continue;
            }
            members.put(e.getKey(), endpoint(e.getValue()));
        }
        Endpoint self = members.get(a.id);

        File data = new File(a.dataDir);
        if (!data.isDirectory() && !data.mkdirs()) {
            usage("cannot create --data-dir " + a.dataDir);
        }
        // SOFABolt (the RPC layer) writes its own log files under logging.path; keep them with the member's data.
        if (System.getProperty("logging.path") == null) {
            System.setProperty("logging.path", new File(data, "logs").getAbsolutePath());
        }

        // Footprint only (no timing): RocksDB preallocates each group's write-ahead log, about 145 MB of blocks for
        // a log that holds a few small entries; on a tmpfs that is memory (12 groups x 4 members came to 6 GB).
        StorageOptionsFactory.registerRocksDBOptions(RocksDBLogStorage.class,
            StorageOptionsFactory.getDefaultRocksDBOptions().setAllowFAllocate(false));

        // One RPC server for all groups of this member.
        RpcServer rpcServer = RaftRpcServerFactory.createRaftRpcServer(self);

        List<Role> roles = new ArrayList<>();
        for (String r : a.roles) {
            List<String> order = a.priorities == null ? List.of() : a.priorities.getOrDefault(r, List.of());
            Map<String, Integer> prio = new HashMap<>();
            for (String m : members.keySet()) {
                prio.put(m, priorityOf(a.priorities, r, m));
            }
            // A joining member starts with no configuration, so it never campaigns: the groups' leaders add it
            // (`admin change-peers`, the library's CliService), and its configuration then comes from their logs.
            Configuration conf = new Configuration();
            if (!a.join) {
                for (Map.Entry<String, Endpoint> m : members.entrySet()) {
                    conf.addPeer(new PeerId(m.getValue().copy(), 0, prio.get(m.getKey())));
                }
            }
            Role role = new Role(a.id, r, order);

            NodeOptions opts = new NodeOptions();
            opts.setElectionTimeoutMs(a.electionTimeoutMs);
            opts.setElectionPriority(prio.get(a.id));
            // The library's leader lease: the leader counts itself leader for this share of the election
            // timeout after a quorum's last answered RPC, and its step-down timer (every election timeout / 2)
            // steps it down once a quorum has not answered within it. 90 is the default, set explicitly.
            opts.setLeaderLeaseTimeRatio(90);
            opts.setInitialConf(conf);
            opts.setFsm(role);
            File dir = new File(data, "group-" + r);
            if (!dir.isDirectory() && !dir.mkdirs()) {
                usage("cannot create " + dir);
            }
            opts.setLogUri(new File(dir, "log").getPath());
            opts.setRaftMetaUri(new File(dir, "meta").getPath());
            opts.setSnapshotUri(new File(dir, "snapshot").getPath());
            // Many groups in one process: shared timers and scheduler, as the multi-raft-group guidance says.
            opts.setSharedTimerPool(true);
            opts.setSharedElectionTimer(true);
            opts.setSharedVoteTimer(true);
            opts.setSharedStepDownTimer(true);
            opts.setSharedSnapshotTimer(true);
            RaftOptions ro = new RaftOptions();
            // Lease-based linearizable reads (ReadIndex answered from the leader lease).
            ro.setReadOnlyOptions(ReadOnlyOption.ReadOnlyLeaseBased);
            // Election timer = ET + uniform[0, maxElectionDelayMs); the default 1000 ms is kept in proportion to ET.
            ro.setMaxElectionDelayMs(a.electionTimeoutMs);
            opts.setRaftOptions(ro);

            PeerId serverId = new PeerId(self.copy(), 0, prio.get(a.id));
            role.service = new RaftGroupService("elect-" + r, serverId, opts, rpcServer, true);
            roles.add(role);
        }

        // SIGTERM / SIGINT during start-up wait for it to finish (the stop takes the same lock), then stop.
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stop(a, roles, rpcServer));
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> stop(a, roles, rpcServer));

        synchronized (LIFECYCLE) {
            if (STOPPING.get()) {
                return;
            }
            // The RPC server first: peers reach this member as soon as its groups exist (a request for a group
            // not created yet is answered with an error and retried by the library), and a taken port fails fast.
            boolean listening;
            try {
                listening = rpcServer.init(null);
            } catch (RuntimeException e) {
                log("RPC server failed to start on " + a.listen + ": " + e);
                listening = false;
            }
            if (!listening) {
                log("RPC server failed to start on " + a.listen);
                Runtime.getRuntime().halt(1);
            }
            for (Role role : roles) {
                try {
                    role.node = role.service.start(false);
                } catch (RuntimeException e) {
                    log("role " + role.name + ": raft node failed to start: " + e);
                    Runtime.getRuntime().halt(1);
                }
            }

            StringBuilder url = new StringBuilder("jraft://" + a.id + "@" + a.listen + "?peers=");
            boolean first = true;
            for (Map.Entry<String, Endpoint> m : members.entrySet()) {
                if (m.getKey().equals(a.id)) {
                    continue;
                }
                url.append(first ? "" : ",").append(m.getKey()).append('@').append(m.getValue());
                first = false;
            }
            url.append("&election_timeout_ms=").append(a.electionTimeoutMs);
            System.err.println("elect member: " + a.id + " started on " + url);
            System.err.flush();
        }

        new CountDownLatch(1).await(); // the signal handler ends the process
    }

    /** Graceful stop: hand each led group to its next-priority live peer, shut the groups down, exit 0. */
    private static void stop(Args a, List<Role> roles, RpcServer rpcServer) {
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
                role.close();
            }
            OUT.flush();
            Runtime.getRuntime().halt(0);
        }, "stop-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        synchronized (LIFECYCLE) {
            stopStarted(a, roles, rpcServer);
        }
    }

    private static void stopStarted(Args a, List<Role> roles, RpcServer rpcServer) {
        // 1. Leadership transfer (Node#transferLeadershipTo): onLeaderStop fires at once (revoked).
        List<Role> transferring = new ArrayList<>();
        for (Role role : roles) {
            Node node = role.node;
            if (node == null || !node.isLeader()) {
                continue;
            }
            PeerId target = chooseTarget(node, role);
            Status st = node.transferLeadershipTo(target);
            log("role " + role.name + ": transfer leadership to " + target + ": " + st);
            if (st.isOk()) {
                transferring.add(role);
            }
        }
        // 2. Wait (bounded) until each of those groups has a new leader that is not this member.
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(a.electionTimeoutMs + 500L);
        for (Role role : transferring) {
            while (System.nanoTime() < deadline) {
                PeerId leader = role.node.getLeaderId();
                if (leader != null && !leader.isEmpty() && !leader.equals(role.service.getServerId())) {
                    break;
                }
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    break;
                }
            }
        }
        // 3. Shut every group down (a leader still leading here wakes a candidate itself), then the RPC server.
        for (Role role : roles) {
            role.service.shutdown();
        }
        for (Role role : roles) {
            if (role.node == null) {
                continue;
            }
            try {
                role.node.join();
            } catch (InterruptedException e) {
                break;
            }
        }
        for (Role role : roles) {
            role.close();
        }
        try {
            rpcServer.shutdown();
        } catch (RuntimeException e) {
            log("RPC server shutdown: " + e);
        }
        OUT.flush();
        log("stopped");
        Runtime.getRuntime().halt(0);
    }

    /** The highest-priority peer the leader sees alive (PeerId.ANY_PEER lets the library pick when none). */
    private static PeerId chooseTarget(Node node, Role role) {
        List<PeerId> alive;
        try {
            alive = node.listAlivePeers();
        } catch (IllegalStateException e) {
            return PeerId.ANY_PEER;
        }
        PeerId best = null;
        for (PeerId p : alive) {
            if (p.equals(role.service.getServerId())) {
                continue;
            }
            if (best == null || p.getPriority() > best.getPriority()) {
                best = p;
            }
        }
        return best == null ? PeerId.ANY_PEER : best;
    }
}
