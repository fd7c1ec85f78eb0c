package elect.anchor.ratis;

import org.apache.ratis.RaftConfigKeys;
import org.apache.ratis.client.RaftClient;
import org.apache.ratis.client.RaftClientConfigKeys;
import org.apache.ratis.conf.Parameters;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.exceptions.AlreadyExistsException;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.retry.RetryPolicies;
import org.apache.ratis.rpc.SupportedRpcType;
import org.apache.ratis.util.TimeDuration;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code ratis admin change-peers}: what an operator of a Ratis cluster runs to change its members. New peers are
 * started first (with {@code --join}: no groups); then for every role's group, each new peer is given the group
 * (group management: add, with the configuration wanted) and a client asks {@code admin().setConfiguration(peers)},
 * which the leader carries out by joint consensus after the new peers have caught up, and answers once the new
 * configuration has committed.
 */
final class Admin {

    private Admin() {
    }

    static int run(String[] argv) {
        if (argv.length == 0 || !argv[0].equals("change-peers")) {
            Main.usage("admin: the one command is change-peers");
        }
        List<String> roles = new ArrayList<>();
        LinkedHashMap<String, String> now = new LinkedHashMap<>();
        LinkedHashMap<String, String> to = new LinkedHashMap<>();
        Map<String, List<String>> priorities = Map.of();
        long timeoutMs = 30_000;
        for (int i = 1; i < argv.length; i += 2) {
            if (i + 1 >= argv.length) {
                Main.usage("admin: missing value for " + argv[i]);
            }
            String value = argv[i + 1];
            switch (argv[i]) {
                case "--roles": roles = Main.split(value, ","); break;
                case "--peers": now = Main.parsePeers(value); break;
                case "--to": to = Main.parsePeers(value); break;
                case "--priorities": priorities = Main.parsePriorities(value); break;
                case "--timeout-ms": timeoutMs = Long.parseLong(value); break;
                default: Main.usage("admin: unknown flag " + argv[i]);
            }
        }
        if (roles.isEmpty() || now.isEmpty() || to.isEmpty()) {
            Main.usage("admin change-peers needs --roles, --peers (the members now) and --to (the members wanted)");
        }
        RaftProperties p = new RaftProperties();
        RaftConfigKeys.Rpc.setType(p, SupportedRpcType.GRPC);
        RaftClientConfigKeys.Rpc.setRequestTimeout(p, TimeDuration.valueOf(5, TimeUnit.SECONDS));
        int failed = 0;
        for (String role : roles) {
            // The client looks for the leader among the members now and those wanted.
            LinkedHashMap<String, String> known = new LinkedHashMap<>(now);
            known.putAll(to);
            List<RaftPeer> group = new ArrayList<>();
            known.forEach((id, address) -> group.add(RaftPeer.newBuilder().setId(id).setAddress(address).build()));
            List<String> order = priorities.getOrDefault(role, List.of());
            List<RaftPeer> wanted = new ArrayList<>();
            to.forEach((id, address) -> wanted.add(RaftPeer.newBuilder().setId(id).setAddress(address)
                .setPriority(Main.priorityValue(order, id)).build()));
            for (RaftPeer peer : wanted) {
                if (!now.containsKey(peer.getId().toString()) && !addGroup(p, Main.groupId(role), peer, wanted)) {
                    failed++;
                }
            }
            try (RaftClient client = RaftClient.newBuilder()
                    .setProperties(p)
                    .setParameters(new Parameters())
                    .setRaftGroup(RaftGroup.valueOf(Main.groupId(role), group))
                    .setRetryPolicy(RetryPolicies.retryUpToMaximumCountWithFixedSleep(
                        (int) Math.max(1, timeoutMs / 100), TimeDuration.valueOf(100, TimeUnit.MILLISECONDS)))
                    .build()) {
                RaftClientReply reply = client.admin().setConfiguration(wanted);
                Main.log("role " + role + ": set configuration " + wanted + ": "
                    + (reply.isSuccess() ? "OK" : reply.getException()));
                if (!reply.isSuccess()) {
                    failed++;
                }
            } catch (IOException e) {
                Main.log("role " + role + ": set configuration " + wanted + ": " + e);
                failed++;
            }
        }
        return failed == 0 ? 0 : 1;
    }

    /**
     * Give a new peer the role's group with the configuration wanted (Ratis' group management), just before the
     * leader is asked to add it: a peer that hosts no division of the group cannot be caught up. False if it failed;
     * a peer that has the group already (a retried change) is fine.
     */
    private static boolean addGroup(RaftProperties p, RaftGroupId gid, RaftPeer peer, List<RaftPeer> wanted) {
        try (RaftClient client = RaftClient.newBuilder()
                .setProperties(p)
                .setParameters(new Parameters())
                .setRaftGroup(RaftGroup.valueOf(gid, peer))
                .build()) {
            RaftClientReply reply = client.getGroupManagementApi(peer.getId()).add(RaftGroup.valueOf(gid, wanted));
            if (!reply.isSuccess()) {
                Main.log("group " + gid + ": add to " + peer.getId() + ": " + reply.getException());
            }
            return reply.isSuccess();
        } catch (AlreadyExistsException e) {
            return true;
        } catch (IOException e) {
            if (e.getCause() instanceof AlreadyExistsException || String.valueOf(e.getMessage()).contains("already")) {
                return true;
            }
            Main.log("group " + gid + ": add to " + peer.getId() + ": " + e);
            return false;
        }
    }
}
