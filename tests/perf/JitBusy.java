// A JIT-compiled hot method for test-perf: busyLoop runs until the time
// given (ms) has passed. Launched as a source file (java JitBusy.java MS).
public class JitBusy {
    static long busyLoop(int n) {
        long s = 1;
        for (int i = 0; i < n; i++)
            s = s * 31 + (i ^ (s >>> 7));
        return s;
    }

    public static void main(String[] args) {
        long end = System.currentTimeMillis() + Long.parseLong(args[0]);
        long t = 0;
        while (System.currentTimeMillis() < end)
            t += busyLoop(200000);
        System.exit(t == 42 ? 1 : 0);
    }
}
