"""A config revision, from source to cluster, entering each floor once: load the repo once,
compile once, plan, judge by the revision's policies, apply. `reconciler plan` / `apply`,
`reconciler local up` and the daemon's convergence all walk it; the clients it plans and
applies through are built once by the caller (`Clients`)."""
