"""What the benchmarks share: each benchmark module is a scenario built on these.

- stack: the benchmark's own local stack (`reconciler local up` in the background), its stop,
  and SIGTERM turned into SystemExit so that the stop runs;
- loadgen: Pod bodies, creating and deleting many Pods at once, and a load generator in a
  process of its own that creates Pods (at once or paced), watches them and deletes them;
- timing: wall and CPU time per stage, runs interleaved round-robin, waiting for a condition;
- procs: CPU and memory of processes, threads, the stack's daemons and the machine (/proc);
- report: progress lines, the machine line, percentiles, table rows, targets.
"""
