// A JIT-compiled hot function for the profilers' tests: busyLoop, called
// by outer, runs until the time given (ms, argv[2]) has passed. Run as
// node --perf-basic-prof --interpreted-frames-native-stack jit-busy.js MS.
'use strict';

function busyLoop(n) {
    let s = 0;
    for (let i = 0; i < n; i++)
        s += Math.sqrt(i) % 7;
    return s;
}

function outer() {
    return busyLoop(200000);
}

const end = Date.now() + Number(process.argv[2]);
let t = 0;
while (Date.now() < end)
    t += outer();
process.exit(t > 0 ? 0 : 1);
