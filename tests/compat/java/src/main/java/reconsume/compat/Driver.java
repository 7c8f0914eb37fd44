package reconsume.compat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.HashMap;
import java.util.Map;

/**
 * Runs one scenario of Apache RocketMQ's Java client against a name server:
 * {@code java -jar java-client-driver.jar SCENARIO --namesrv=HOST:PORT --topic=T --group=G ...}.
 *
 * <p>Prints one JSON object per line on stdout (see {@link Events}) and exits 0 after a "done"
 * event; 2 after an "error" event naming what was still missing at the deadline
 * ({@code --timeout-ms}, default 30 s); 1 after an "error" event with the exception; 3 if even
 * shutting down hangs 5 s past the deadline. The client's own log goes to the directory of the
 * system property {@code rocketmq.client.logRoot}.
 */
public final class Driver {
    private Driver() {
    }

    public static void main(String[] args) {
        Map<String, String> options = new HashMap<>();
        String scenario = "";
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 2) {
                options.put(arg.substring(2, eq), arg.substring(eq + 1));
            } else {
                scenario = arg;
            }
        }
        Events events = new Events(System.out);
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
            new Scenarios(new Clients(options, deadline, events), events).run(scenario);
            events.emit("done", "scenario", scenario);
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
        // The client leaves non-daemon threads behind (Netty's event loops, timers).
        System.exit(code);
    }
}
