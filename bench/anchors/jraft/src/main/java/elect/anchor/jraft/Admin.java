package elect.anchor.jraft;

import com.alipay.sofa.jraft.CliService;
import com.alipay.sofa.jraft.RaftServiceFactory;
import com.alipay.sofa.jraft.Status;
import com.alipay.sofa.jraft.conf.Configuration;
import com.alipay.sofa.jraft.entity.PeerId;
import com.alipay.sofa.jraft.option.CliOptions;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code jraft admin change-peers}: what an operator of a sofa-jraft cluster runs to change its members. For every
 * role's group it calls the library's {@code CliService.changePeers}, which finds the group's leader and returns
 * once the leader has committed the change (joint consensus, new peers caught up first). A group whose leader is
 * changing answers with an error; it is asked again until the deadline.
 */
final class Admin {

    private Admin() {
    }

    static int run(String[] argv) throws InterruptedException {
        if (argv.length == 0 || !argv[0].equals("change-peers")) {
            Main.usage("admin: the one command is change-peers");
        }
        List<String> roles = new ArrayList<>();
        LinkedHashMap<String, String> now = new LinkedHashMap<>();
        LinkedHashMap<String, String> to = new LinkedHashMap<>();
        Map<String, List<String>> priorities = null;
        long timeoutMs = 30_000;
        for (int i = 1; i < argv.length; i++) {
            if (i + 1 >= argv.length) {
                Main.usage("admin: missing value for " + argv[i]);
            }
            String value = argv[++i];
            switch (argv[i - 1]) {
                case "--roles":
                    for (String r : value.split(",")) {
                        if (!r.isBlank()) {
                            roles.add(r.trim());
                        }
                    }
                    break;
                case "--peers": now = Main.parsePeers(value); break;
                case "--to": to = Main.parsePeers(value); break;
                case "--priorities": priorities = Main.parsePriorities(value); break;
                case "--timeout-ms": timeoutMs = Long.parseLong(value); break;
                default: Main.usage("admin: unknown flag " + argv[i - 1]);
            }
        }
        if (roles.isEmpty() || now.isEmpty() || to.isEmpty()) {
            Main.usage("admin change-peers needs --roles, --peers (the members now) and --to (the members wanted)");
        }
        CliOptions options = new CliOptions();
        options.setTimeoutMs(5_000);
        options.setMaxRetry(3);
        CliService cli = RaftServiceFactory.createAndInitCliService(options);
        int failed = 0;
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        try {
            for (String role : roles) {
                // The leader is looked for among the members now and those wanted (a retry may find it among both).
                Configuration known = new Configuration();
                Configuration wanted = new Configuration();
                for (Map.Entry<String, String> m : now.entrySet()) {
                    known.addPeer(new PeerId(Main.endpoint(m.getValue()), 0));
                }
                for (Map.Entry<String, String> m : to.entrySet()) {
                    PeerId peer = new PeerId(Main.endpoint(m.getValue()), 0,
                        Main.priorityOf(priorities, role, m.getKey()));
                    wanted.addPeer(peer);
                    known.addPeer(new PeerId(Main.endpoint(m.getValue()), 0));
                }
                Status st = cli.changePeers("elect-" + role, known, wanted);
                while (!st.isOk() && System.nanoTime() < deadline) {
                    Main.log("role " + role + ": change peers: " + st + "; asking again");
                    Thread.sleep(100);
                    st = cli.changePeers("elect-" + role, known, wanted);
                }
                Main.log("role " + role + ": change peers to " + wanted + ": " + st);
                if (!st.isOk()) {
                    failed++;
                }
            }
        } finally {
            cli.shutdown();
        }
        return failed == 0 ? 0 : 1;
    }
}
