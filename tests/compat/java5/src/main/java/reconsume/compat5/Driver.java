package reconsume.compat5;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.HashMap;
import java.util.Map;

/**
 * Runs one scenario of Apache RocketMQ's 5.x Java client (gRPC) against an endpoint:
 * {@code java -jar java5-client-driver.jar SCENARIO --endpoints HOST:PORT --topic T --group G ...}
 * (options as {@code --name value} or {@code --name=value}; a flag alone means true).
 *
 * <p>Prints one JSON object per line on stdout (see {@link Events}) and exits 0 after a "done"
 * event; 2 after an "error" event naming what was still missing at the deadline
 * ({@code --timeout-ms}, default 30 s); 1 after an "error" event with the exception; 3 if even
 * shutting down hangs 5 s past the deadline. The client's own log goes to the directory of the
 * system property {@code rocketmq.log.root}.
 */
public final class Driver {
    private Driver() {
    }

    static Map<String, String> parse(String[] args, int from) {
        Map<String, String> options = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + arg);
            }
            int eq = arg.indexOf('=');
            if (eq > 2) {
                options.put(arg.substring(2, eq), arg.substring(eq + 1));
            } else if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                options.put(arg.substring(2), args[++i]);
            } else {
                options.put(arg.substring(2), "true");
            }
        }
        return options;
    }

    public static void main(String[] args) {
        Events events = new Events(System.out);
        String scenario = args.length > 0 ? args[0] : "";
        Map<String, String> options;
        try {
            options = parse(args, 1);
        } catch (IllegalArgumentException bad) {
            events.emit("error", "error", bad.getMessage());
            System.exit(1);
            return;
        }
        long timeoutMs = Long.parseLong(options.getOrDefault("timeout-ms", "30000"));
        long deadline = System.currentTimeMillis() + timeoutMs;
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(timeoutMs + 5000);
            } catch (InterruptedException stopped) {
                return;
            }
            events.emit("error", "error", "still running 5 s past the deadline");
            Runtime.getRuntime().halt(3);
        }, "deadline-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        int code;
        try {
            Map<String, Object> summary = new Scenarios(new Clients(options, deadline), events).run(scenario);
            Object[] pairs = new Object[2 + 2 * summary.size()];
            pairs[0] = "scenario";
            pairs[1] = scenario;
            int at = 2;
            for (Map.Entry<String, Object> entry : summary.entrySet()) {
                pairs[at++] = entry.getKey();
                pairs[at++] = entry.getValue();
            }
            events.emit("done", pairs);
            code = 0;
        } catch (Clients.Deadline missing) {
            events.emit("error", "error", missing.getMessage());
            code = 2;
        } catch (Throwable failure) {
            StringWriter trace = new StringWriter();
            failure.printStackTrace(new PrintWriter(trace));
            events.emit("error", "error", failure.toString(), "trace", trace.toString());
            code = 1;
        }
        // The client may leave non-daemon threads behind (gRPC's and its schedulers).
        System.exit(code);
    }
}
